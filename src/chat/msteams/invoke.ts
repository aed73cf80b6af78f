import type { FastifyBaseLogger } from 'fastify'
import { sessionPath } from '../../console/links.ts'
import type { ChatAccount } from '../../identity/chat-link-store.ts'
import { CHAT_ID } from '../../identity/link-tokens.ts'
import type { People } from '../../identity/people.ts'
import type { SessionRegistry } from '../../sessions/types.ts'
import { denialText, lookUpQuestion, outcomeLabel, within } from '../answering.ts'
import type { AnswerOutcome, ChatAnswers, Denial } from '../answers.ts'
import { type ChatClaims, type ClaimOutcome, claimLabel } from '../claims.ts'
import type { ChatMessageStore, PostedQuestion } from '../messages.ts'
import {
  closedHow,
  formFor,
  type QuestionRef,
  type QuestionView,
  type ReplyClosing,
  refOf,
} from '../questions.ts'
import type { RuntimeReads } from '../runtime-reads.ts'
import {
  type AdaptiveCard as AnyCard,
  activityTenants,
  cardInvokeResponse,
  type TeamsActivity,
} from './activity.ts'
import {
  type AdaptiveCard,
  closedCard,
  closingText,
  executeOf,
  type Notice,
  noticeCard,
  type PersonalView,
  questionCard,
  sinceOf,
  VERB,
  valuesFromData,
} from './cards.ts'
import { encodeReach, type TeamsLinkCodes } from './link-codes.ts'
import { teamsLabel } from './messages.ts'

/** What {@link TeamsInvoke} works with. */
export interface TeamsInvokeOptions {
  readonly answers: ChatAnswers
  /** "I'm on it" and "Give it back", through the console's claim route (the same as Slack's). */
  readonly claims: ChatClaims
  readonly people: People
  readonly messages: ChatMessageStore
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
  readonly linkCodes: TeamsLinkCodes
  /** Who answered a question and what (TeamsMessages.answered). */
  readonly answered: (question: QuestionRef) => Promise<ReplyClosing>
  /** GATEWAY_PUBLIC_ORIGIN + base path: where links to the gateway point. */
  readonly base: string
  /** Counts an invoke by verb and outcome (`krg_msteams_activities_total`). */
  readonly count?: (verb: string, outcome: string) => void
  readonly log: FastifyBaseLogger
}

/**
 * Teams waits about fifteen seconds for an invoke's answer: this much is given to the answer itself; an answer
 * still on its way then is said so, and the card is updated for everyone when the question closes.
 */
const ANSWER_BUDGET_MS = 9000
/** A due link refresh is waited for this long before an answer goes on with the link as it stands. */
const REFRESH_WAIT_MS = 3000

/**
 * Teams' `adaptiveCard/action` invokes (Universal Actions), once the messaging endpoint checked the bearer and
 * the tenant: a choice button, "Answer" with the card's inputs, "This is not me" on a link code. Who clicked is
 * the activity's Entra object id in the bot's tenant, a Teams account (chat/answers.ts decides whether it is
 * linked, through an Entra sign-in or a link, and may answer); the answer takes the console's path. The invoke
 * is answered with the card that person sees next: the field errors next to their inputs, "you may only
 * watch", "Connect your account", "answered first by …", or the answered card. Everyone else's card changes
 * when the question closes (TeamsMessages).
 */
export class TeamsInvoke {
  readonly #o: TeamsInvokeOptions

  constructor(options: TeamsInvokeOptions) {
    this.#o = options
  }

  /** The invoke's answer (always a card, so Teams shows something). */
  async handle(activity: TeamsActivity): Promise<ReturnType<typeof cardInvokeResponse>> {
    return cardInvokeResponse((await this.card(activity)) as unknown as AnyCard)
  }

  /** The card an invoke is answered with. */
  async card(activity: TeamsActivity): Promise<AdaptiveCard> {
    const action = activity.name === 'adaptiveCard/action' ? executeOf(activity.value) : null
    const person = personOf(activity)
    if (action === null) return this.#notice('other', 'ignored', 'The gateway does not know this action.')
    if (person === null)
      return this.#notice(
        action.verb,
        'unknown_person',
        'Teams did not say who you are: answer in the console.',
      )
    if (action.verb === VERB.notMe) {
      this.#count('not_me', 'handled')
      return this.#o.linkCodes.notMe(person.account, action.data.ref)
    }
    const ref = refOf(action.data)
    if (ref === null || !KNOWN.has(action.verb))
      return this.#notice(action.verb, 'ignored', 'The gateway does not know this action.')
    const label = teamsLabel(activity.conversation.id)
    const found = await lookUpQuestion(this.#o, ref, label)
    const team = (await this.#o.sessions.get(ref.kasmId))?.team ?? ''
    if (!found.open) {
      this.#count(action.verb, 'closed')
      const view = this.#view(ref, team, found.closing === undefined ? null : await this.#posted(ref, label))
      if (view !== null && found.closing !== undefined)
        return closedCard(view, found.closing.line, {
          text: found.closing.by === 'reply' ? 'Someone answered first.' : 'This question is no longer open.',
          tone: 'warning',
        })
      return noticeCard({ text: 'This question is no longer open.', tone: 'warning' })
    }
    const held = await this.#o.claims.holder(ref)
    const view = {
      ...(this.#view(ref, team, found.question) as QuestionView),
      ...(held ? { holder: held } : {}),
    }
    const auth = await this.#o.answers.authorise(person.account, ref.kasmId, REFRESH_WAIT_MS)
    if (!auth.ok) {
      this.#count(action.verb, auth.reason)
      return questionCard(view, { notice: await this.#denial(person, auth.reason, auth.team) })
    }
    if (action.verb === VERB.claim || action.verb === VERB.release) {
      const giveBack = action.verb === VERB.release
      const outcome = giveBack
        ? await this.#o.claims.giveBack(auth.operator, ref)
        : await this.#o.claims.take(auth.operator, ref)
      this.#count(
        action.verb,
        outcome.kind === 'done' ? (giveBack ? 'given_back' : 'taken') : claimLabel(outcome),
      )
      return this.#claimCard(outcome, giveBack, view, auth.team)
    }
    let values: Record<string, unknown>
    if (action.verb === VERB.choose) {
      const form = formChoices(found.question, action.data.c)
      if (form === null)
        return this.#notice(action.verb, 'ignored', 'This choice is not one of the question’s.')
      values = form
    } else {
      const read = valuesFromData(found.question.fields, action.data)
      if (read.issues.length > 0) {
        this.#count(action.verb, 'invalid')
        return questionCard(view, {
          notice: { text: 'Not sent: check the fields below.', tone: 'attention' },
          issues: read.issues,
          given: action.data,
        })
      }
      values = read.values
    }
    const sending = this.#o.answers.answer(auth.operator, {
      account: person.account,
      ...ref,
      fields: found.question.fields,
      values,
    })
    const outcome = await within(sending, ANSWER_BUDGET_MS)
    if (outcome === null) {
      void sending.then((done) => this.#count(action.verb, outcomeLabel(done)))
      return questionCard(view, {
        notice: {
          text: 'Your answer is on its way to the run: this card changes when it closes.',
          tone: 'good',
        },
      })
    }
    this.#count(action.verb, outcomeLabel(outcome))
    return this.#outcomeCard(outcome, view, values, action.data, auth.operator)
  }

  async #outcomeCard(
    outcome: AnswerOutcome,
    view: QuestionView,
    values: Record<string, unknown>,
    given: Record<string, unknown>,
    me: { sub: string; name?: string },
  ): Promise<AdaptiveCard> {
    switch (outcome.kind) {
      case 'accepted': {
        const answerer = { name: me.name ?? me.sub, sub: me.sub, via: 'msteams' as const, at: '' }
        const line = closingText({ by: 'reply', answerer, values }, view.fields)
        return closedCard(view, line, {
          text: outcome.replayed ? 'Your answer was sent already.' : 'Your answer was sent.',
          tone: 'good',
        })
      }
      case 'invalid': {
        const personal: PersonalView = {
          notice: { text: 'The run did not accept the answer: check the fields below.', tone: 'attention' },
          issues: outcome.fields,
          given,
        }
        return questionCard(view, personal)
      }
      case 'taken': {
        if (outcome.by?.sub === me.sub)
          return closedCard(
            view,
            closingText({ by: 'reply', answerer: outcome.by, values: null }, view.fields),
            {
              text: 'You answered this question already.',
              tone: 'good',
            },
          )
        const closing = await this.#o.answered(view)
        const line = closingText(
          outcome.by === null ? closing : { ...closing, answerer: outcome.by },
          view.fields,
        )
        return closedCard(view, line, { text: `Someone answered first. ${line}`, tone: 'warning' })
      }
      case 'closed': {
        const why = closedHow(outcome.closedBy)
        const text =
          why === undefined ? 'This question is no longer open.' : `This question is no longer open: ${why}.`
        return closedCard(view, closingText({ by: outcome.closedBy ?? 'closed' }, view.fields), {
          text,
          tone: 'warning',
        })
      }
      case 'moved_on':
        return noticeCard({
          text: 'The run has moved on: this is not the question it asks now.',
          tone: 'warning',
        })
      case 'denied':
        return questionCard(view, {
          notice: { text: denialText(outcome.reason, 'Teams'), tone: 'attention' },
        })
      case 'failed':
        return questionCard(view, {
          notice: {
            text: `Your answer could not be sent (${outcome.code}). Try again, or answer in the console.`,
            tone: 'attention',
          },
          given,
        })
    }
  }

  /**
   * The card after "I'm on it" or "Give it back": done, the holder (the clicker) or nobody, as everyone's card
   * will say once the claim is seen; else why not, only to them: who holds it and since when, that it closed,
   * that they may only watch.
   */
  async #claimCard(
    outcome: ClaimOutcome,
    giveBack: boolean,
    view: QuestionView,
    team: string,
  ): Promise<AdaptiveCard> {
    const { holder: _, ...free } = view
    switch (outcome.kind) {
      case 'done': {
        if (giveBack)
          return questionCard(free, { notice: { text: 'You gave this question back.', tone: 'good' } })
        const holder = (await this.#o.claims.holder(view)) ?? undefined
        const mine = holder === undefined ? view : { ...view, holder }
        return questionCard(mine, {
          notice: { text: 'You are on this question: the others see your name on it.', tone: 'good' },
        })
      }
      case 'held': {
        const h = outcome.holder
        if (h === null)
          return questionCard(free, {
            notice: {
              text: giveBack
                ? 'You do not hold this question: nobody does now.'
                : 'Someone else took this question just now.',
              tone: 'warning',
            },
          })
        const since = sinceOf(h.at)
        return questionCard(
          { ...view, holder: h },
          {
            notice: {
              text: giveBack
                ? `${h.name} is on this question since ${since}: only they can give it back.`
                : `${h.name} is already on this question since ${since}.`,
              tone: 'warning',
            },
          },
        )
      }
      case 'closed':
        return noticeCard({ text: 'This question is no longer open.', tone: 'warning' })
      case 'denied':
        return questionCard(view, {
          notice: { text: denialText(outcome.reason, 'Teams', team), tone: 'attention' },
        })
      case 'failed':
        return questionCard(view, {
          notice: {
            text: `That did not work (${outcome.code}). Try again, or use the console.`,
            tone: 'attention',
          },
        })
    }
  }

  /** Why the person may not answer; for an unlinked one, the link that connects their account. */
  async #denial(person: Person, reason: Denial, team?: string): Promise<Notice> {
    if (reason !== 'unlinked' && reason !== 'suspended')
      return { text: denialText(reason, 'Teams', team), tone: 'attention' }
    const token = await this.#o.people.linkTokens.sign({
      ...person.account,
      ...(person.name === undefined ? {} : { userName: person.name }),
      reach: encodeReach({ id: person.memberId, serviceUrl: person.serviceUrl }),
    })
    return {
      text:
        reason === 'unlinked'
          ? 'Connect your Teams account to answer from Teams: sign in to the gateway once, and your answers carry your name. The link is for you alone and works for 10 minutes.'
          : 'Connect your Teams account again: your identity provider did not renew the sign-in it was linked with.',
      tone: 'attention',
      link: {
        title: 'Connect your Teams account',
        url: `${this.#o.base}auth/slack-link?t=${encodeURIComponent(token)}`,
      },
    }
  }

  async #posted(ref: QuestionRef, label: string): Promise<PostedQuestion | null> {
    const posted = await this.#o.messages
      .get({ target: label, kasmId: ref.kasmId, run: ref.run, item: ref.requestId })
      .catch(() => null)
    return posted?.question ?? null
  }

  #view(ref: QuestionRef, team: string, question: PostedQuestion | null): QuestionView | null {
    if (question === null) return null
    // The same link as the card first posted: the question and its run.
    const url = sessionPath(this.#o.base, ref.kasmId, { request: ref.requestId, run: ref.run })
    return { ...question, ...ref, team, url, answerable: true }
  }

  #notice(verb: string, outcome: string, text: string): AdaptiveCard {
    this.#count(verb, outcome)
    return noticeCard({ text, tone: 'warning' })
  }

  #count(verb: string, outcome: string): void {
    this.#o.count?.(verb.replace(/^krg\./, ''), outcome)
  }
}

/** The verbs of a question's card. */
const KNOWN: ReadonlySet<string> = new Set([VERB.choose, VERB.answer, VERB.claim, VERB.release])

/** The Teams user of an invoke: their account (tenant, Entra object id), name, member id and service URL. */
interface Person {
  readonly account: ChatAccount
  readonly name?: string
  readonly memberId: string
  readonly serviceUrl: string
}

function personOf(activity: TeamsActivity): Person | null {
  const [tenant] =
    activity.channelData?.tenant?.id !== undefined
      ? [activity.channelData.tenant.id]
      : activityTenants(activity)
  const oid = activity.from.aadObjectId?.toLowerCase()
  const workspace = tenant?.toLowerCase()
  if (
    oid === undefined ||
    workspace === undefined ||
    !CHAT_ID.msteams.test(oid) ||
    !CHAT_ID.msteams.test(workspace)
  )
    return null
  const name = activity.from.name?.trim()
  return {
    account: { chat: 'msteams', workspace, user: oid },
    ...(name ? { name: name.slice(0, 80) } : {}),
    memberId: activity.from.id,
    serviceUrl: activity.serviceUrl,
  }
}

/** The values of a choice button's click (`c`: the choice's index), or null when it names none. */
function formChoices(question: PostedQuestion, index: unknown): Record<string, unknown> | null {
  const form = formFor(question.fields, 'Teams')
  const choice =
    form.kind === 'buttons' && Number.isSafeInteger(index) ? form.choices[index as number] : undefined
  return form.kind !== 'buttons' || choice === undefined ? null : { [form.field.id]: choice.value }
}
