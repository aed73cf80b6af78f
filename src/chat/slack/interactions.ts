import type { WebClient } from '@slack/web-api'
import type { FastifyBaseLogger } from 'fastify'
import { sessionPath } from '../../console/links.ts'
import type { ChatAccount } from '../../identity/chat-link-store.ts'
import type { People } from '../../identity/people.ts'
import type { FieldDef } from '../../protocol/fields.ts'
import type { SessionRegistry } from '../../sessions/types.ts'
import { denialText, lookUpQuestion, outcomeLabel, within } from '../answering.ts'
import type { AnswerOutcome, ChatAnswers, Denial } from '../answers.ts'
import { type ChatClaims, type ClaimOutcome, claimLabel } from '../claims.ts'
import type { ChatMessageStore, PostedQuestion } from '../messages.ts'
import { closedHow } from '../questions.ts'
import type { RuntimeReads } from '../runtime-reads.ts'
import {
  ACTION,
  answerModal,
  closingLine,
  decodeRef,
  ephemeral,
  formFor,
  MODAL_CALLBACK,
  Mrkdwn,
  md,
  modalErrors,
  noticeModal,
  type QuestionRef,
  type QuestionView,
  slackTime,
  valuesFromState,
} from './blocks.ts'
import { slackErrorCode } from './error-code.ts'
import type { SlackLinkCodes } from './link-codes.ts'
import type { SlackMessages } from './messages.ts'
import type { InteractionType, SlackMetrics } from './metrics.ts'

/** What answers the transport: the body of the acknowledgement, and the work to do once it is sent. */
export interface Handled {
  /** The acknowledgement's body (a modal's `response_action`), or nothing. */
  readonly ack?: Record<string, unknown>
  /** Runs after the acknowledgement went out; never awaited by the transport's request. */
  readonly after?: () => Promise<void>
}

/** Where an interaction came from: the Request URL (with the sender's address) or Socket Mode. */
export interface InteractionOrigin {
  readonly clientIp?: string
}

/** What {@link SlackInteractions} works with. */
export interface SlackInteractionsOptions {
  /** A Web API client for interactions: few, quick retries (a trigger lives three seconds). */
  readonly web: WebClient
  readonly answers: ChatAnswers
  /** "I'm on it" and "Give it back", through the console's claim route. */
  readonly claims: ChatClaims
  readonly people: People
  readonly messages: ChatMessageStore
  readonly slackMessages: SlackMessages
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
  readonly metrics: SlackMetrics
  /** "This is not me" on the code that links an account. */
  readonly linkCodes: SlackLinkCodes
  /** GATEWAY_PUBLIC_ORIGIN + base path: where links to the gateway point. */
  readonly base: string
  readonly log: FastifyBaseLogger
}

/** The part of a Slack interaction payload the gateway reads (everything else is ignored). */
interface Payload {
  readonly type?: unknown
  readonly team?: { readonly id?: unknown; readonly domain?: unknown } | null
  readonly user?: {
    readonly id?: unknown
    readonly username?: unknown
    readonly name?: unknown
    readonly team_id?: unknown
  }
  readonly trigger_id?: unknown
  readonly channel?: { readonly id?: unknown } | null
  readonly container?: { readonly channel_id?: unknown; readonly message_ts?: unknown } | null
  readonly message?: { readonly ts?: unknown } | null
  readonly actions?: unknown
  readonly view?: {
    readonly id?: unknown
    readonly callback_id?: unknown
    readonly private_metadata?: unknown
    readonly state?: { readonly values?: unknown } | null
  } | null
}

/** The chat user of an interaction, with the names the link page shows. */
interface Person extends ChatAccount {
  readonly userName?: string
  readonly workspaceName?: string
}

/** A modal submission must be answered within three seconds: this much is given to the answer itself. */
const SUBMIT_BUDGET_MS = 2200
/** A due link refresh is waited for this long before a modal opens (its trigger lives three seconds). */
const OPEN_REFRESH_MS = 1200
const SLACK_ID = /^[A-Z0-9]{2,32}$/

/**
 * Slack's interactions, whichever way they arrive (the Request URL or Socket Mode): the answer buttons of a
 * single-choice question, "Answer…" and its modal, "I'm on it" and "Give it back". Buttons and "Answer…"
 * are acknowledged at once and worked on after; a modal's submission is answered in its acknowledgement
 * (field errors, or closed), with what did not fit in the time continuing after it. Who may answer, and what
 * an answer or a claim goes through, is chat/answers.ts's and chat/claims.ts's; this renders the outcome
 * where the person is: an ephemeral message, or the modal.
 */
export class SlackInteractions {
  readonly #o: SlackInteractionsOptions

  constructor(options: SlackInteractionsOptions) {
    this.#o = options
  }

  /** Handles one interaction payload (already known to be Slack's). */
  async handle(raw: unknown, origin: InteractionOrigin): Promise<Handled> {
    const payload = (typeof raw === 'object' && raw !== null ? raw : {}) as Payload
    const person = personOf(payload)
    if (payload.type === 'block_actions' && person !== null) {
      const action = firstAction(payload.actions)
      if (action?.id.startsWith(`${ACTION.choose}:`))
        return { after: () => this.#choose(payload, person, action, origin) }
      if (action?.id === ACTION.answer) return { after: () => this.#openModal(payload, person, action.value) }
      if (action?.id === ACTION.claim || action?.id === ACTION.release)
        return { after: () => this.#claim(payload, person, action, origin) }
      if (action?.id === ACTION.console || action?.id === ACTION.connect)
        return this.#count('link', 'ignored')
      if (action?.id === ACTION.notMe) {
        const where = { channel: channelOf(payload), ts: messageTsOf(payload), ...origin }
        return { after: () => this.#o.linkCodes.notMe(person, action.value, where) }
      }
    }
    if (payload.type === 'view_submission' && payload.view?.callback_id === MODAL_CALLBACK && person !== null)
      return this.#submit(payload, person, origin)
    return this.#count('other', 'ignored')
  }

  #count(type: InteractionType, outcome: string): Handled {
    this.#o.metrics.interactions.inc({ type, outcome })
    return {}
  }

  /** A choice button: the answer is the choice, sent as the person. */
  async #choose(payload: Payload, person: Person, action: Action, origin: InteractionOrigin): Promise<void> {
    const channel = channelOf(payload)
    const ref = decodeRef(action.value)
    const index = ref === null ? -1 : Number(ref.extra.c)
    const closing: { line?: Mrkdwn } = {}
    const question = ref === null ? null : await this.#question(ref, channel, closing)
    const form = question === null ? null : formFor(question.fields)
    const choice = form?.kind === 'buttons' ? form.choices[index] : undefined
    if (ref === null || question === null || form?.kind !== 'buttons' || choice === undefined) {
      this.#count('button', 'closed')
      return this.#tell(channel, person, closing.line ?? md`This question is no longer open.`)
    }
    const auth = await this.#o.answers.authorise(person, ref.kasmId)
    if (!auth.ok) return this.#deny('button', channel, person, auth.reason, auth.team)
    const outcome = await this.#o.answers.answer(auth.operator, {
      account: person,
      ...ref,
      fields: question.fields,
      values: { [form.field.id]: choice.value },
      ...(origin.clientIp === undefined ? {} : { clientIp: origin.clientIp }),
    })
    this.#count('button', outcomeLabel(outcome))
    if (outcome.kind === 'accepted') return
    await this.#tell(channel, person, await this.#say(outcome, ref, question.fields, auth.operator.sub))
  }

  /**
   * "I'm on it" (take the question) or "Give it back", as the person, through the console's rules. Done, the
   * person is told nothing: the message changes for everyone once the claim is seen (a `request.claimed`
   * notification). Else they are told why, only them: who holds it and since when, that it closed, or the
   * link to connect their account.
   */
  async #claim(payload: Payload, person: Person, action: Action, origin: InteractionOrigin): Promise<void> {
    const channel = channelOf(payload)
    const ref = decodeRef(action.value)
    if (ref === null) return void this.#count('claim', 'ignored')
    const auth = await this.#o.answers.authorise(person, ref.kasmId)
    if (!auth.ok) return this.#deny('claim', channel, person, auth.reason, auth.team)
    const giveBack = action.id === ACTION.release
    const question = { kasmId: ref.kasmId, run: ref.run, requestId: ref.requestId }
    const outcome = giveBack
      ? await this.#o.claims.giveBack(auth.operator, question, origin.clientIp)
      : await this.#o.claims.take(auth.operator, question, origin.clientIp)
    this.#count('claim', outcome.kind === 'done' ? (giveBack ? 'given_back' : 'taken') : claimLabel(outcome))
    if (outcome.kind === 'done') return
    await this.#tell(channel, person, this.#claimSay(outcome, giveBack, auth.team))
  }

  /** What the person is told of a claim that was not done. */
  #claimSay(outcome: Exclude<ClaimOutcome, { kind: 'done' }>, giveBack: boolean, team: string): Mrkdwn {
    switch (outcome.kind) {
      case 'held': {
        const h = outcome.holder
        if (h === null)
          return giveBack
            ? md`You do not hold this question: nobody does now.`
            : md`Someone else took this question just now.`
        const since = new Mrkdwn(slackTime(h.at))
        return giveBack
          ? md`*${h.name}* is on this question since ${since}: only they can give it back.`
          : md`*${h.name}* is already on this question since ${since}.`
      }
      case 'closed':
        return md`This question is no longer open.`
      case 'denied':
        return this.#denialText(outcome.reason, team)
      case 'failed':
        return md`That did not work (${outcome.code}). Try again, or use the console.`
    }
  }

  /** "Answer…": the modal, opened with the interaction's trigger (valid three seconds). */
  async #openModal(payload: Payload, person: Person, value: string | undefined): Promise<void> {
    const channel = channelOf(payload)
    const ts = messageTsOf(payload)
    const ref = decodeRef(value)
    const trigger = typeof payload.trigger_id === 'string' ? payload.trigger_id : undefined
    if (ref === null || trigger === undefined || ts === undefined)
      return void this.#count('modal_open', 'ignored')
    const auth = await this.#o.answers.authorise(person, ref.kasmId, OPEN_REFRESH_MS)
    if (!auth.ok) return this.#deny('modal_open', channel, person, auth.reason, auth.team)
    const closing: { line?: Mrkdwn } = {}
    const question = await this.#question(ref, channel, closing)
    if (question === null) {
      this.#count('modal_open', 'closed')
      return this.#tell(channel, person, closing.line ?? md`This question is no longer open.`)
    }
    try {
      await this.#o.web.views.open({
        trigger_id: trigger,
        view: answerModal(this.#view(ref, auth.team, question), { channel: channel ?? '', ts }),
      })
      this.#count('modal_open', 'opened')
    } catch (err) {
      const code = slackErrorCode(err)
      this.#count('modal_open', 'failed')
      this.#o.log.warn({ error: code }, 'slack: the answer modal did not open')
      // A trigger lives three seconds: a slow answer here leaves the person a click to try again.
      await this.#tell(
        channel,
        person,
        md`The form did not open (${code}). Click “Answer…” again, or answer in the console.`,
      )
    }
  }

  /** The modal's submission: checked, sent, and answered in the acknowledgement when there is time. */
  async #submit(payload: Payload, person: Person, origin: InteractionOrigin): Promise<Handled> {
    const started = Date.now()
    const view = payload.view ?? {}
    const ref = decodeRef(view.private_metadata)
    if (ref === null) return this.#count('modal_submit', 'ignored')
    const channel = typeof ref.extra.ch === 'string' && ref.extra.ch !== '' ? ref.extra.ch : undefined
    const auth = await this.#o.answers.authorise(person, ref.kasmId, SUBMIT_BUDGET_MS / 2)
    if (!auth.ok) {
      this.#count('modal_submit', auth.reason)
      return update(noticeModal('Not sent', await this.#denial(person, auth.reason, auth.team)))
    }
    // Read within what is left of the three seconds (the message store has it at once; the runtime may not).
    const read = await within(
      this.#question(ref, channel).then((q) => ({ q })),
      SUBMIT_BUDGET_MS - (Date.now() - started),
    )
    if (read === null) {
      this.#count('modal_submit', 'failed')
      return update(
        noticeModal('Not sent', md`The gateway could not read the question in time: click “Answer…” again.`),
      )
    }
    const question = read.q
    if (question === null) {
      this.#count('modal_submit', 'closed')
      return update(noticeModal('Not sent', md`This question is no longer open.`))
    }
    const { values, issues } = valuesFromState(question.fields, view.state?.values)
    if (issues.length > 0) {
      this.#count('modal_submit', 'invalid')
      return { ack: { response_action: 'errors', errors: modalErrors(question.fields, issues) } }
    }
    const sending = this.#o.answers.answer(auth.operator, {
      account: person,
      ...ref,
      fields: question.fields,
      values,
      ...(origin.clientIp === undefined ? {} : { clientIp: origin.clientIp }),
    })
    const outcome = await within(sending, SUBMIT_BUDGET_MS - (Date.now() - started))
    const say = (o: AnswerOutcome) => this.#say(o, ref, question.fields, auth.operator.sub)
    if (outcome !== null) {
      this.#count('modal_submit', outcomeLabel(outcome))
      if (outcome.kind === 'accepted') return { ack: { response_action: 'clear' } }
      if (outcome.kind === 'invalid')
        return { ack: { response_action: 'errors', errors: modalErrors(question.fields, outcome.fields) } }
      return update(noticeModal('Not sent', await say(outcome)))
    }
    // Not answered in time for the acknowledgement: the modal says so, and is updated once it is.
    const viewId = typeof view.id === 'string' ? view.id : undefined
    return {
      ...update(noticeModal('Sending…', md`Your answer is on its way to the run.`)),
      after: async () => {
        const done = await sending
        this.#count('modal_submit', outcomeLabel(done))
        if (viewId === undefined) return
        const title = done.kind === 'accepted' ? 'Sent' : 'Not sent'
        await this.#o.web.views
          .update({ view_id: viewId, view: noticeModal(title, await say(done)) })
          .catch((err: unknown) =>
            this.#o.log.warn({ error: slackErrorCode(err) }, 'slack: modal not updated'),
          )
      },
    }
  }

  /**
   * The question an interaction is about (chat/answering.ts); null when it is not open, with what its
   * message says of the closing in `closing` when there is one.
   */
  async #question(
    ref: QuestionRef,
    channel: string | undefined,
    closing: { line?: Mrkdwn } = {},
  ): Promise<PostedQuestion | null> {
    const found = await lookUpQuestion(this.#o, ref, channel === undefined ? undefined : `slack:${channel}`)
    if (found.open) return found.question
    const how = found.closing
    if (how !== undefined) {
      // The line closingLine made when the message closed, escaped then.
      const line = new Mrkdwn(how.line)
      closing.line =
        how.by === 'reply'
          ? md`Someone answered first. ${line}`
          : md`This question is no longer open: ${line}.`
    }
    return null
  }

  #view(ref: QuestionRef, team: string, question: PostedQuestion): QuestionView {
    // The same link as the card first posted: the question and its run.
    const url = sessionPath(this.#o.base, ref.kasmId, { request: ref.requestId, run: ref.run })
    return { ...question, ...ref, team, url, answerable: true }
  }

  /** What the person is told of an outcome that is not an accepted answer. */
  async #say(
    outcome: AnswerOutcome,
    ref: QuestionRef,
    fields: readonly FieldDef[],
    sub: string,
  ): Promise<Mrkdwn> {
    switch (outcome.kind) {
      case 'accepted':
        return md`Your answer was sent.`
      case 'invalid': {
        const issues = outcome.fields.map((f) => md`${f.field || 'answer'}: ${f.error}`)
        return md`The run did not accept the answer: ${Mrkdwn.join(issues, '; ')}`
      }
      case 'taken': {
        if (outcome.by?.sub === sub) return md`You answered this question already.`
        const closing = await this.#o.slackMessages.answered(ref.kasmId, ref.run, ref.requestId)
        const line = closingLine(outcome.by === null ? closing : { ...closing, answerer: outcome.by }, fields)
        return md`Someone answered first. ${line}`
      }
      case 'closed': {
        const why = closedHow(outcome.closedBy)
        return why === undefined
          ? md`This question is no longer open.`
          : md`This question is no longer open: ${why}.`
      }
      case 'moved_on':
        return md`The run has moved on: this is not the question it asks now.`
      case 'denied':
        return this.#denialText(outcome.reason)
      case 'failed':
        return md`Your answer could not be sent (${outcome.code}). Try again, or answer in the console.`
    }
  }

  async #deny(
    type: InteractionType,
    channel: string | undefined,
    person: Person,
    reason: Denial,
    team?: string,
  ) {
    this.#count(type, reason)
    if (reason === 'unlinked' || reason === 'suspended') {
      const link = await this.#linkUrl(person)
      const text =
        reason === 'unlinked'
          ? md`*Connect your Slack account* to answer from Slack: sign in to the gateway once, and your answers carry your name. The link is for you alone and works for 10 minutes.`
          : md`*Connect your Slack account again*: your identity provider did not renew the sign-in your Slack account was linked with.`
      return this.#tell(channel, person, text, {
        label: 'Connect your Slack account',
        url: link,
        primary: true,
      })
    }
    return this.#tell(channel, person, this.#denialText(reason, team))
  }

  /** A denial for a modal, with the link as text (a modal cannot hold a sign-in). */
  async #denial(person: Person, reason: Denial, team?: string): Promise<Mrkdwn> {
    if (reason === 'unlinked' || reason === 'suspended')
      return md`Connect your Slack account first: ${await this.#linkUrl(person)}`
    return this.#denialText(reason, team)
  }

  #denialText(reason: Denial, team?: string): Mrkdwn {
    return md`${denialText(reason, 'Slack', team)}`
  }

  async #linkUrl(person: Person): Promise<string> {
    const token = await this.#o.people.linkTokens.sign(person)
    return `${this.#o.base}auth/slack-link?t=${encodeURIComponent(token)}`
  }

  /** An ephemeral message to the person, in the channel the interaction came from. */
  async #tell(
    channel: string | undefined,
    person: Person,
    text: Mrkdwn,
    button?: { label: string; url: string; primary?: boolean },
  ): Promise<void> {
    if (channel === undefined) return
    try {
      await this.#o.web.chat.postEphemeral({ channel, user: person.user, ...ephemeral(text, button) })
    } catch (err) {
      this.#o.log.warn({ error: slackErrorCode(err) }, 'slack: ephemeral reply not posted')
    }
  }
}

function update(view: unknown): Handled & { ack: Record<string, unknown> } {
  return { ack: { response_action: 'update', view } }
}

interface Action {
  readonly id: string
  readonly value: string | undefined
}

function firstAction(actions: unknown): Action | undefined {
  const first = Array.isArray(actions) ? (actions[0] as Record<string, unknown> | undefined) : undefined
  if (typeof first?.action_id !== 'string') return undefined
  return { id: first.action_id, value: typeof first.value === 'string' ? first.value : undefined }
}

function personOf(payload: Payload): Person | null {
  const user = payload.user?.id
  const workspace = payload.user?.team_id ?? payload.team?.id
  if (
    typeof user !== 'string' ||
    typeof workspace !== 'string' ||
    !SLACK_ID.test(user) ||
    !SLACK_ID.test(workspace)
  )
    return null
  const name = payload.user?.username ?? payload.user?.name
  const domain = payload.team?.domain
  return {
    chat: 'slack',
    workspace,
    user,
    ...(typeof name === 'string' && name !== '' ? { userName: name } : {}),
    ...(typeof domain === 'string' && domain !== '' ? { workspaceName: domain } : {}),
  }
}

function channelOf(payload: Payload): string | undefined {
  const id = payload.channel?.id ?? payload.container?.channel_id
  return typeof id === 'string' && SLACK_ID.test(id) ? id : undefined
}

function messageTsOf(payload: Payload): string | undefined {
  const ts = payload.container?.message_ts ?? payload.message?.ts
  return typeof ts === 'string' && /^\d{1,12}\.\d{1,8}$/.test(ts) ? ts : undefined
}
