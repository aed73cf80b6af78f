import type { FastifyBaseLogger } from 'fastify'
import { personLabel } from '../../escalation/fanout.ts'
import type { ClaimNotice } from '../../notify/notification.ts'
import type { SessionRegistry } from '../../sessions/types.ts'
import type { ChatAnswers } from '../answers.ts'
import {
  answeredClosing,
  fallbackQuestion,
  questionOfJob,
  questionViewOf,
  requestIdOf,
  runJob,
  whereOf,
} from '../job-questions.ts'
import type { ChatMessage, ChatMessageKey, ChatMessageStore, PostedQuestion } from '../messages.ts'
import type { ChatDeliveryResult, ChatJob } from '../outbox.ts'
import type { Closing, QuestionView, ReplyClosing } from '../questions.ts'
import type { RuntimeReads } from '../runtime-reads.ts'
import type { OutboundActivity } from './activity.ts'
import { TeamsApiError } from './api-error.ts'
import {
  type AdaptiveCard,
  CARD_CONTENT_TYPE,
  claimLapsedCard,
  closedCard,
  closingText,
  handoffCard,
  questionCard,
  reminderCard,
  runEndedCard,
} from './cards.ts'
import type { TeamsConnector } from './connector.ts'

/** A Teams channel (or chat) the notify file names: its conversation id and the service URL to reach it. */
export interface TeamsPlace {
  readonly conversation: string
  readonly serviceUrl: string
  /** The target's label (`msteams:<conversation>`): the key of its messages' records. */
  readonly label: string
  /** A person's 1:1 chat, made when delivered (see TeamsChatTarget.person). */
  readonly person?: { readonly tenantId: string; readonly user: string }
}

/** What {@link TeamsMessages} works with. */
export interface TeamsMessagesOptions {
  readonly connector: TeamsConnector
  readonly messages: ChatMessageStore
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
  readonly answers: ChatAnswers
  /** The Teams place of a chat job's target; null when the target is not a Teams one. */
  readonly placeOf: (job: ChatJob) => TeamsPlace | null
  /** GATEWAY_CLAIM_TTL_S: how long a claim lasts without an answer (what a lapsed claim's holder is told). */
  readonly claimTtlS: number
  /** Where a person's 1:1 chat is made when no channel of the notify file names a service URL. */
  readonly personalServiceUrl: () => Promise<string | null>
  readonly log: FastifyBaseLogger
}

/** People whose 1:1 chat id a replica keeps (a few hundred bytes each). */
const MAX_CHATS = 10_000

/** The label of a Teams conversation's target (the notify file's channel, or the conversation a click came from). */
export function teamsLabel(conversation: string): string {
  // A reply thread in a channel is `<channel>;messageid=<id>`: its card was posted in the channel.
  return `msteams:${conversation.split(';')[0]}`
}

/** The activity that carries `card`. */
export function cardActivity(card: AdaptiveCard, replyToId?: string): OutboundActivity {
  return {
    type: 'message',
    attachments: [{ contentType: CARD_CONTENT_TYPE, content: card }],
    ...(replyToId === undefined ? {} : { replyToId }),
  }
}

/**
 * The Teams side of attention routing: a question's card posted in the team's channel when it opens, a
 * reminder as a reply under it, the card updated for everyone when the question closes (who answered and what,
 * or how else it closed: console, Slack, Teams, timeout, cancel, run end); the same for handoffs, and a card
 * for a run that ended needing a person. Each card is remembered (chat/messages.ts: the channel is the
 * conversation id, the `ts` the activity id) so that whatever follows finds it on any replica.
 */
export class TeamsMessages {
  readonly #o: TeamsMessagesOptions
  /** People's 1:1 chats made by this replica, by service URL, tenant and user: Teams answers the same one each time. */
  readonly #chats = new Map<string, string>()

  constructor(options: TeamsMessagesOptions) {
    this.#o = options
  }

  async deliver(job: ChatJob): Promise<ChatDeliveryResult> {
    const target = this.#o.placeOf(job)
    if (target === null) return { ok: false, error: 'not_a_teams_target' }
    try {
      const found = await this.#personal(target)
      if (found === null) return { ok: false, error: 'no_service_url' }
      try {
        return await this.#deliverIn(job, found.place)
      } catch (err) {
        // A kept 1:1 chat that Teams no longer knows (the person removed the app, maybe added it again): nothing
        // was posted there, so the chat is made again and the delivery tried once more in it.
        if (
          found.kept === undefined ||
          !(err instanceof TeamsApiError) ||
          (err.status !== 403 && err.status !== 404)
        )
          throw err
        if (this.#chats.get(found.kept) === found.place.conversation) this.#chats.delete(found.kept)
        const made = await this.#personal(target)
        if (made === null) return { ok: false, error: 'no_service_url' }
        return await this.#deliverIn(job, made.place)
      }
    } catch (err) {
      if (err instanceof TeamsApiError) return { ok: false, error: err.code }
      this.#o.log.warn({ err }, 'teams: delivery failed')
      return { ok: false, error: 'teams_failed' }
    }
  }

  async #deliverIn(job: ChatJob, place: TeamsPlace): Promise<ChatDeliveryResult> {
    const n = job.notification
    return await runJob(job, place.label, {
      open: (key) => this.#open(job, place, key),
      remind: (key) => this.#remind(place, key),
      close: (key) => this.#close(job, place, key),
      claimed: (key, holder) => this.#held(job, place, key, holder),
      unclaimed: (key) => this.#unclaimed(job, place, key),
      handoff: (key) => this.#handoff(job, place, key),
      handoffEnded: (key) => this.#handoffEnded(job, place, key),
      runEnded: async () => {
        const card = runEndedCard({
          ...whereOf(job),
          verdict: n.verdict ?? null,
          outcome: n.outcome ?? null,
        })
        await this.#o.connector.post(place.serviceUrl, place.conversation, cardActivity(card))
        return { ok: true }
      },
    })
  }

  /**
   * A person's place made real: the bot's 1:1 chat with them, reached by their Entra object id, which Teams
   * takes for a user who has the app (null when no service URL is known). Teams answers the same conversation
   * for the same person, so the id is kept (per replica, at most {@link MAX_CHATS}) and every later delivery
   * (the claim, the lapse, the closing) skips the call; another replica, or one restarted, makes it once more.
   * `kept` is the id's key when it came from what this replica kept (it may have gone stale since).
   */
  async #personal(place: TeamsPlace): Promise<{ place: TeamsPlace; kept?: string } | null> {
    if (place.person === undefined) return { place }
    const serviceUrl = place.serviceUrl || (await this.#o.personalServiceUrl())
    if (!serviceUrl) return null
    const { tenantId, user } = place.person
    const key = [serviceUrl, tenantId, user].join('\u0000')
    const kept = this.#chats.get(key)
    if (kept !== undefined) return { place: { ...place, serviceUrl, conversation: kept }, kept: key }
    const conversation = (await this.#o.connector.createPersonal(serviceUrl, tenantId, user)).id
    // Oldest first out: a Map iterates in insertion order.
    if (this.#chats.size >= MAX_CHATS) this.#chats.delete(this.#chats.keys().next().value as string)
    this.#chats.set(key, conversation)
    return { place: { ...place, serviceUrl, conversation } }
  }

  /** The open question's card, updated in place for everyone to say who holds it (`holder`), or nobody. */
  async #held(
    job: ChatJob,
    place: TeamsPlace,
    key: ChatMessageKey,
    holder?: ClaimNotice,
  ): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    // Never posted here, or closed already (its closing says more than a holder would).
    if (message === null || message.state !== 'open' || message.question === undefined) return { ok: true }
    const view = this.view(job, message.question)
    const card = questionCard(holder === undefined ? view : { ...view, holder })
    await this.#o.connector.update(place.serviceUrl, message.channel, message.ts, cardActivity(card))
    return { ok: true }
  }

  /**
   * The question is free again: its card names nobody; and when the claim lapsed and this is the holder's own
   * 1:1 chat, they are told that it did and that the escalation goes on.
   */
  async #unclaimed(job: ChatJob, place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const done = await this.#held(job, place, key)
    const unclaimed = job.notification.unclaimed
    if (unclaimed?.reason !== 'lapsed' || place.label !== `${personLabel(unclaimed.holder.sub)}/msteams`)
      return done
    const message = await this.#o.messages.get(key)
    const title = message?.question?.title ?? job.notification.request?.title ?? ''
    const card = claimLapsedCard({ title, afterS: this.#o.claimTtlS })
    await this.#o.connector.post(place.serviceUrl, message?.channel ?? place.conversation, cardActivity(card))
    return { ok: true }
  }

  async #open(job: ChatJob, place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    // Posted already (an earlier owner's attempt that may have failed after posting): never twice.
    if ((await this.#o.messages.get(key)) !== null) return { ok: true }
    const question = await questionOfJob(this.#o, job)
    const posted = await this.#o.connector.post(
      place.serviceUrl,
      place.conversation,
      cardActivity(questionCard(this.view(job, question))),
    )
    await this.#remember(key, job, place, posted.id, question)
    return { ok: true }
  }

  async #remind(place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    // Nothing to reply to (it was never posted here): a reminder alone would say nothing new.
    if (message === null || message.state !== 'open') return { ok: true }
    await this.#o.connector.post(
      place.serviceUrl,
      // A 1:1 chat has no threads: the reminder follows the card there.
      place.person === undefined ? threadOf(message) : message.channel,
      cardActivity(reminderCard(message.question?.deadline ?? null), message.ts),
    )
    return { ok: true }
  }

  async #close(job: ChatJob, place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    if (message === null) return { ok: true }
    const n = job.notification
    const question = message.question ?? fallbackQuestion(job)
    const closedBy = n.request?.closed_by ?? 'closed'
    const closing: Closing =
      closedBy === 'reply' ? await this.answered(n.kasmId, n.run, requestIdOf(n)) : { by: closedBy }
    const line = closingText(closing, question.fields)
    await this.#o.connector.update(
      place.serviceUrl,
      message.channel,
      message.ts,
      cardActivity(closedCard(this.view(job, question), line)),
    )
    await this.#o.messages.put(key, { ...message, state: 'closed', closing: { by: closing.by, line } })
    return { ok: true }
  }

  /** Who answered a question (the audit log) and what (the runtime's record of the reply). */
  answered(kasmId: string, run: string, requestId: string): Promise<ReplyClosing> {
    return answeredClosing(this.#o, { kasmId, run, requestId })
  }

  async #handoff(job: ChatJob, place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    if ((await this.#o.messages.get(key)) !== null) return { ok: true }
    const card = handoffCard({ ...whereOf(job), reason: job.notification.escalation?.reason ?? '' })
    const posted = await this.#o.connector.post(place.serviceUrl, place.conversation, cardActivity(card))
    await this.#remember(key, job, place, posted.id, undefined)
    return { ok: true }
  }

  async #handoffEnded(job: ChatJob, place: TeamsPlace, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    if (message === null) return { ok: true }
    const e = job.notification.escalation
    const card = handoffCard({ ...whereOf(job), reason: e?.reason ?? '' }, e?.ended_by ?? 'ended')
    await this.#o.connector.update(place.serviceUrl, message.channel, message.ts, cardActivity(card))
    await this.#o.messages.put(key, { ...message, state: 'closed' })
    return { ok: true }
  }

  /** The question of a job as a card shows it. */
  view(job: ChatJob, question: PostedQuestion): QuestionView {
    return questionViewOf(job, question, true)
  }

  async #remember(
    key: ChatMessageKey,
    job: ChatJob,
    place: TeamsPlace,
    activityId: string,
    question: PostedQuestion | undefined,
  ): Promise<void> {
    const n = job.notification
    const message: ChatMessage = {
      channel: place.conversation,
      ts: activityId,
      kasmId: n.kasmId,
      team: n.team,
      run: n.run,
      item: key.item,
      ...(question === undefined ? {} : { question }),
      state: 'open',
    }
    await this.#o.messages.put(key, message)
  }
}

/** A reply goes into the card's thread: `<channel>;messageid=<card's activity id>`. */
function threadOf(message: ChatMessage): string {
  return `${message.channel};messageid=${message.ts}`
}
