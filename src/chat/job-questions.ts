import type { ClaimNotice, Notification } from '../notify/notification.ts'
import type { SessionRegistry } from '../sessions/types.ts'
import type { ChatAnswers } from './answers.ts'
import type { ChatMessageKey, PostedQuestion } from './messages.ts'
import type { ChatDeliveryResult, ChatJob } from './outbox.ts'
import type { QuestionView, ReplyClosing } from './questions.ts'
import type { RuntimeReads } from './runtime-reads.ts'

/**
 * What every chat adapter reads for a notification it delivers: the question as the runtime defines it now
 * (to post it), and who answered it and what (to close it). Platform-neutral; the adapters render.
 */

/** What the reads need. */
export interface JobSources {
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
  readonly answers: ChatAnswers
}

/** The request id a notification is about ('' for none). */
export function requestIdOf(n: Notification): string {
  return n.request?.request_id ?? ''
}

/** The session, team and console link of a job. */
export function whereOf(job: ChatJob): { kasmId: string; team: string; url: string } {
  return { kasmId: job.notification.kasmId, team: job.notification.team, url: job.url }
}

/** A delivered question as a chat message shows it: the run's question, where it lives, whether it is answerable there. */
export function questionViewOf(job: ChatJob, question: PostedQuestion, answerable: boolean): QuestionView {
  const n = job.notification
  return {
    ...question,
    kasmId: n.kasmId,
    team: n.team,
    run: n.run,
    requestId: requestIdOf(n),
    url: job.url,
    answerable,
  }
}

/** What the notification itself says of the question: no fields, so it is answered in the console. */
export function fallbackQuestion(job: ChatJob): PostedQuestion {
  const r = job.notification.request
  return { title: r?.title ?? '', fields: [], revision: 1, deadline: r?.deadline ?? null }
}

/** The question as the runtime defines it now; the notification's summary when it cannot be read. */
export async function questionOfJob(sources: JobSources, job: ChatJob): Promise<PostedQuestion> {
  const n = job.notification
  const session = await sources.sessions.get(n.kasmId)
  const read = session === undefined ? null : await sources.reads.question(session, requestIdOf(n))
  if (read === null || read.run !== n.run) return fallbackQuestion(job)
  return {
    title: read.title,
    ...(read.help === undefined ? {} : { help: read.help }),
    fields: read.fields,
    revision: read.revision,
    deadline: read.deadline ?? n.request?.deadline ?? null,
  }
}

/** Who answered a question (the audit log) and what (the runtime's record of the reply). */
export async function answeredClosing(
  sources: JobSources,
  question: { kasmId: string; run: string; requestId: string },
): Promise<ReplyClosing> {
  const { kasmId, run, requestId } = question
  const answerer = await sources.answers.whoAnswered({ kasmId, run, requestId })
  const session = await sources.sessions.get(kasmId)
  const asked = session === undefined ? null : await sources.reads.question(session, requestId)
  const values =
    session === undefined || asked?.run !== run || asked.replyId === undefined
      ? null
      : await sources.reads.replyValues(session, asked.replyId)
  return { by: 'reply', answerer, values }
}

/** An adapter's steps for each kind of notification, each given the key of the message it is about. */
export interface JobSteps {
  open(key: ChatMessageKey): Promise<ChatDeliveryResult>
  remind(key: ChatMessageKey): Promise<ChatDeliveryResult>
  close(key: ChatMessageKey): Promise<ChatDeliveryResult>
  handoff(key: ChatMessageKey): Promise<ChatDeliveryResult>
  handoffEnded(key: ChatMessageKey): Promise<ChatDeliveryResult>
  runEnded(): Promise<ChatDeliveryResult>
  /** Someone said "I'm on it": the message shows who (absent: the adapter does not show holders). */
  claimed?(key: ChatMessageKey, claim: ClaimNotice | undefined): Promise<ChatDeliveryResult>
  /** The claim was given back or lapsed: the message shows nobody again. */
  unclaimed?(key: ChatMessageKey): Promise<ChatDeliveryResult>
}

/**
 * Runs the step of `job`'s notification, the message's key made of `target` (the channel's label), the
 * session, the run and the item (the request id, or `escalation`).
 */
export function runJob(job: ChatJob, target: string, steps: JobSteps): Promise<ChatDeliveryResult> {
  const n = job.notification
  const key = (item: string): ChatMessageKey => ({ target, kasmId: n.kasmId, run: n.run, item })
  switch (n.type) {
    case 'request.opened':
      return n.reminder ? steps.remind(key(requestIdOf(n))) : steps.open(key(requestIdOf(n)))
    case 'request.closed':
      return steps.close(key(requestIdOf(n)))
    case 'request.claimed':
      return steps.claimed?.(key(requestIdOf(n)), n.claim) ?? Promise.resolve({ ok: true })
    case 'request.unclaimed':
      return steps.unclaimed?.(key(requestIdOf(n))) ?? Promise.resolve({ ok: true })
    case 'escalation.started':
      return steps.handoff(key('escalation'))
    case 'escalation.ended':
      return steps.handoffEnded(key('escalation'))
    case 'run.ended':
      return steps.runEnded()
  }
}
