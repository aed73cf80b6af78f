import type { WebClient } from '@slack/web-api'
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
import type { RuntimeReads } from '../runtime-reads.ts'
import {
  type Closing,
  claimLapsedText,
  closedMessage,
  closingLine,
  handoffMessage,
  type QuestionView,
  questionMessage,
  type ReplyClosing,
  reminderText,
  runEndedMessage,
} from './blocks.ts'
import { slackErrorCode } from './error-code.ts'

/** What {@link SlackMessages} works with. */
export interface SlackMessagesOptions {
  /** The Web API client for deliveries (its retries span GATEWAY_NOTIFY_RETRY_FOR_S). */
  readonly web: WebClient
  readonly messages: ChatMessageStore
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
  readonly answers: ChatAnswers
  /** Whether answers can come back (a signing secret or an app token is configured). */
  readonly answerable: boolean
  /** GATEWAY_CLAIM_TTL_S: how long a claim lasts without an answer (what a lapsed claim's holder is told). */
  readonly claimTtlS: number
  readonly log: FastifyBaseLogger
}

/**
 * The Slack side of attention routing: a question's message (`chat.postMessage`) when it opens, reminders
 * and the closing as threaded replies, and the message updated (`chat.update`) for everyone when someone
 * says "I'm on it" (and gives it back) and when it closes, saying who answered and what, or how else it
 * closed; the same for handoffs, and a message for a run that ended needing a person. A target whose channel
 * is a user id (a `person:` target) gets all of it as direct messages: posting to the user id opens the DM,
 * and the DM's own channel id, which Slack answers with, is what later updates use. Each message is
 * remembered (chat/messages.ts) so that whatever follows finds it on any replica.
 */
export class SlackMessages {
  readonly #o: SlackMessagesOptions

  constructor(options: SlackMessagesOptions) {
    this.#o = options
  }

  async deliver(job: ChatJob): Promise<ChatDeliveryResult> {
    const n = job.notification
    try {
      return await runJob(job, job.target.label, {
        open: (key) => this.#open(job, key),
        remind: (key) => this.#remind(key),
        close: (key) => this.#close(job, key),
        handoff: (key) => this.#handoff(job, key),
        handoffEnded: (key) => this.#handoffEnded(job, key),
        claimed: (key, claim) => this.#held(job, key, claim),
        unclaimed: (key) => this.#unclaimed(job, key),
        runEnded: async () => {
          const message = runEndedMessage({
            ...whereOf(job),
            verdict: n.verdict ?? null,
            outcome: n.outcome ?? null,
          })
          await this.#o.web.chat.postMessage({ channel: slackChannel(job), ...message, ...NO_UNFURL })
          return { ok: true }
        },
      })
    } catch (err) {
      return { ok: false, error: slackErrorCode(err) }
    }
  }

  async #open(job: ChatJob, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    // Posted already (an earlier owner's attempt that may have failed after posting): never twice.
    if ((await this.#o.messages.get(key)) !== null) return { ok: true }
    const question = await questionOfJob(this.#o, job)
    const view = this.#view(job, question)
    const posted = await this.#o.web.chat.postMessage({
      channel: slackChannel(job),
      ...questionMessage(view),
      ...NO_UNFURL,
    })
    await this.#remember(
      key,
      job,
      String(posted.channel ?? slackChannel(job)),
      String(posted.ts),
      question,
      'open',
    )
    return { ok: true }
  }

  async #remind(key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    // Nothing to thread on (it was never posted here): a reminder alone would say nothing new.
    if (message === null || message.state !== 'open') return { ok: true }
    await this.#o.web.chat.postMessage({
      channel: message.channel,
      thread_ts: message.ts,
      text: reminderText({ deadline: message.question?.deadline ?? null }),
    })
    return { ok: true }
  }

  /** The open question's message, updated in place to say who holds it (`holder`), or that nobody does. */
  async #held(job: ChatJob, key: ChatMessageKey, holder?: ClaimNotice): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    // Never posted here, or closed already (its closing says more than a holder would).
    if (message === null || message.state !== 'open' || message.question === undefined) return { ok: true }
    const view = this.#view(job, message.question)
    await this.#o.web.chat.update({
      channel: message.channel,
      ts: message.ts,
      ...questionMessage(holder === undefined ? view : { ...view, holder }),
    })
    return { ok: true }
  }

  /**
   * The question is free again: its message no longer names a holder; and when the claim lapsed and this is
   * the holder's own direct message, they are told that it did and that the escalation goes on.
   */
  async #unclaimed(job: ChatJob, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const done = await this.#held(job, key)
    const unclaimed = job.notification.unclaimed
    if (unclaimed?.reason !== 'lapsed' || job.target.label !== `${personLabel(unclaimed.holder.sub)}/slack`)
      return done
    const message = await this.#o.messages.get(key)
    const title = message?.question?.title ?? job.notification.request?.title ?? ''
    const text = claimLapsedText({ title, afterS: this.#o.claimTtlS }).text
    await this.#o.web.chat.postMessage({ channel: message?.channel ?? slackChannel(job), text })
    return { ok: true }
  }

  async #close(job: ChatJob, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    if (message === null) return { ok: true }
    const n = job.notification
    const question = message.question ?? fallbackQuestion(job)
    const closedBy = n.request?.closed_by ?? 'closed'
    const closing: Closing =
      closedBy === 'reply' ? await this.answered(n.kasmId, n.run, requestIdOf(n)) : { by: closedBy }
    const view = this.#view(job, question)
    const line = closingLine(closing, question.fields).text
    await this.#o.web.chat.update({
      channel: message.channel,
      ts: message.ts,
      ...closedMessage(view, closing),
    })
    await this.#o.web.chat.postMessage({ channel: message.channel, thread_ts: message.ts, text: line })
    await this.#o.messages.put(key, { ...message, state: 'closed', closing: { by: closing.by, line } })
    return { ok: true }
  }

  /** Who answered a question (the audit log) and what (the runtime's record of the reply). */
  answered(kasmId: string, run: string, requestId: string): Promise<ReplyClosing> {
    return answeredClosing(this.#o, { kasmId, run, requestId })
  }

  async #handoff(job: ChatJob, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    if ((await this.#o.messages.get(key)) !== null) return { ok: true }
    const message = handoffMessage({ ...whereOf(job), reason: job.notification.escalation?.reason ?? '' })
    const posted = await this.#o.web.chat.postMessage({
      channel: slackChannel(job),
      ...message,
      ...NO_UNFURL,
    })
    await this.#remember(
      key,
      job,
      String(posted.channel ?? slackChannel(job)),
      String(posted.ts),
      undefined,
      'open',
    )
    return { ok: true }
  }

  async #handoffEnded(job: ChatJob, key: ChatMessageKey): Promise<ChatDeliveryResult> {
    const message = await this.#o.messages.get(key)
    if (message === null) return { ok: true }
    const e = job.notification.escalation
    const ended = handoffMessage({ ...whereOf(job), reason: e?.reason ?? '' }, e?.ended_by ?? 'ended')
    await this.#o.web.chat.update({ channel: message.channel, ts: message.ts, ...ended })
    await this.#o.web.chat.postMessage({ channel: message.channel, thread_ts: message.ts, text: ended.text })
    await this.#o.messages.put(key, { ...message, state: 'closed' })
    return { ok: true }
  }

  #view(job: ChatJob, question: PostedQuestion): QuestionView {
    return questionViewOf(job, question, this.#o.answerable)
  }

  async #remember(
    key: ChatMessageKey,
    job: ChatJob,
    channel: string,
    ts: string,
    question: PostedQuestion | undefined,
    state: ChatMessage['state'],
  ): Promise<void> {
    const n = job.notification
    await this.#o.messages.put(key, {
      channel,
      ts,
      kasmId: n.kasmId,
      team: n.team,
      run: n.run,
      item: key.item,
      ...(question === undefined ? {} : { question }),
      state,
    })
  }
}

/** Links to the console are the gateway's own: Slack need not fetch them. */
const NO_UNFURL = { unfurl_links: false, unfurl_media: false } as const

/** The Slack channel of a job: the notify plugin hands this adapter Slack targets only. */
function slackChannel(job: ChatJob): string {
  if (job.target.chat !== 'slack') throw new Error(`not a Slack target: ${job.target.label}`)
  return job.target.channel
}
