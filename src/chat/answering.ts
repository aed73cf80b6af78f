import type { SessionRegistry } from '../sessions/types.ts'
import type { AnswerOutcome, Denial } from './answers.ts'
import type { ChatMessage, ChatMessageStore, PostedQuestion } from './messages.ts'
import type { QuestionRef } from './questions.ts'
import type { RuntimeReads } from './runtime-reads.ts'

/**
 * The platform-neutral steps of an answer given in a chat, between the adapter that parsed the click and
 * chat/answers.ts that authorises and sends it: which question the click is about (as its message showed
 * it, on any replica, else as the runtime defines it now), the metric label of an outcome, and a time bound
 * for the platforms that want an answer within seconds (Slack's modal, Teams' invoke).
 */

/** The question a click names, or why there is none: closed (with its message's closing, if known). */
export type QuestionLookup =
  | { readonly open: true; readonly question: PostedQuestion }
  | { readonly open: false; readonly closing?: NonNullable<ChatMessage['closing']> }

/** What {@link lookUpQuestion} reads. */
export interface QuestionSources {
  readonly messages: ChatMessageStore
  readonly reads: RuntimeReads
  readonly sessions: SessionRegistry
}

/**
 * The question `ref` names, as the message at `target` (the channel's label) posted it when that message is
 * known at the same revision; else the runtime's definition now, when it is the same run's and open.
 */
export async function lookUpQuestion(
  sources: QuestionSources,
  ref: QuestionRef,
  target: string | undefined,
): Promise<QuestionLookup> {
  if (target !== undefined) {
    const posted = await sources.messages
      .get({ target, kasmId: ref.kasmId, run: ref.run, item: ref.requestId })
      .catch(() => null)
    if (posted?.question !== undefined && posted.question.revision === ref.revision) {
      if (posted.state === 'open') return { open: true, question: posted.question }
      return posted.closing === undefined ? { open: false } : { open: false, closing: posted.closing }
    }
  }
  const session = await sources.sessions.get(ref.kasmId)
  const read = session === undefined ? null : await sources.reads.question(session, ref.requestId)
  if (read === null || read.run !== ref.run || read.state !== 'open' || !read.fieldsValid)
    return { open: false }
  return { open: true, question: read }
}

/** The `outcome` label of an answer in the adapters' interaction metrics. */
export function outcomeLabel(outcome: AnswerOutcome): string {
  if (outcome.kind === 'accepted') return outcome.replayed ? 'repeated' : 'answered'
  if (outcome.kind === 'denied') return outcome.reason
  return outcome.kind
}

/** What `work` resolved to within `ms`, or null (it goes on either way). */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), Math.max(0, ms))
  })
  try {
    return await Promise.race([work, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Why a person may not answer, in words (plain text); `platform` names the chat ("Slack", "Teams"). */
export function denialText(reason: Denial, platform: string, team?: string): string {
  switch (reason) {
    case 'viewer':
      return team === undefined
        ? 'You may only watch this session: answering needs the operator role.'
        : `You may only watch this session: answering needs the operator role in team ${team}.`
    case 'team':
      return 'You may not answer questions of this session: it is not one of your teams.'
    case 'rate_limited':
      return 'Too many requests from you just now: try again in a minute.'
    case 'unavailable':
      return 'The gateway cannot check who you are right now: try again shortly, or answer in the console.'
    default:
      return `Connect your ${platform} account to answer from ${platform}.`
  }
}
