import type { SessionSummary, UpstreamHealth } from '../../summary/types.ts'
import { countdown } from './countdown.ts'
import { h } from './dom.ts'

/** Human words for what the gateway and the runtime report; anything unknown is shown as sent. */

const HEALTH: Record<UpstreamHealth, string> = {
  unknown: 'Connecting',
  live: 'Live',
  not_up: 'Runtime not up yet',
  token_refused: 'Token refused',
  unreachable: 'Unreachable',
}

const HEALTH_HELP: Record<UpstreamHealth, string> = {
  unknown: 'The gateway is connecting to the session runtime.',
  live: 'The gateway reads the run as it happens.',
  not_up: 'The session is starting; the gateway polls until its runtime answers.',
  token_refused: 'The runtime refused the gateway’s messaging token: an administrator must rotate it.',
  unreachable: 'The runtime cannot be reached; the gateway keeps retrying.',
}

/** A badge for the reader's health. */
export function healthBadge(health: UpstreamHealth): HTMLElement {
  return h('span', { class: `badge health-${health}`, title: HEALTH_HELP[health] }, HEALTH[health] ?? health)
}

export function healthText(health: UpstreamHealth): string {
  return HEALTH[health] ?? health
}

export function healthHelp(health: UpstreamHealth): string {
  return HEALTH_HELP[health] ?? ''
}

const PHASES: Record<string, string> = {
  boot: 'Booting',
  launch: 'Launching the app',
  judge: 'Judging',
  steps: 'Running steps',
  plan: 'Planning',
  agentic: 'Agent working',
  done: 'Done',
}

/**
 * The run's state in a few words, saying what it waits for: an answer (while a question is open, whatever
 * the phase), a person (a handoff pause), its loop to finish (a stop); its phase otherwise, its verdict once
 * done.
 */
export function runState(s: SessionSummary | null, handedBackBy?: string): string {
  if (s === null || s.run === null) return 'No run yet'
  if (s.ended !== null) {
    const verdict = s.verdict ?? (s.ended === 'closed' ? 'closed without a verdict' : 'done')
    const text = s.outcome !== null && s.outcome !== s.verdict ? `${verdict} (${s.outcome})` : verdict
    // A person pressed "I'm done, finish": that is what happened; the verdict the escalation fixed stays.
    return s.lastEscalation?.endedBy === 'operator'
      ? `Handed back by ${handedBackBy ?? 'a person'} · ${text}`
      : text
  }
  if (s.openRequests.length > 0) return 'Waiting for an answer'
  if (s.escalation !== null) return 'Waiting for a person (handoff)'
  if (s.loop === 'stopping') return 'Stopping…'
  // The loop exits for a stop, a handoff or the run's end; before the end only the first two.
  if (s.loop === 'exited' && s.phase !== 'done')
    return s.lastEscalation === null
      ? 'Agent stopped; the run is finishing'
      : 'Handed back; the run is finishing'
  if (s.phase === null) return 'Starting'
  return PHASES[s.phase] ?? s.phase
}

/**
 * The run's state as a badge: {@link runState}, with the time left to answer the soonest question while one
 * is open ("Waiting for an answer · 1:23 left").
 */
export function stateBadge(s: SessionSummary | null, handedBackBy?: string): HTMLElement {
  const tone = s?.ended ? verdictTone(s.verdict, s.outcome) : 'neutral'
  const deadline = s !== null && s.ended === null ? (s.openRequests[0]?.deadline ?? null) : null
  return h(
    'span',
    { class: `badge run-state tone-${tone}` },
    runState(s, handedBackBy),
    deadline === null ? null : h('span', { class: 'deadline' }, ' · ', countdown(deadline)),
  )
}

/** What an ended run's verdict means when the outcome says more than the verdict (a handoff, a stop). */
export function verdictNote(s: SessionSummary): string | null {
  if (s.ended === null) return null
  if (s.outcome === 'escalated')
    return 'The agent handed the run to a person: the verdict is fixed as test-error (escalated) when it escalates, and a handoff never resumes the agent.'
  if (s.outcome === 'stopped') return 'A person stopped the agent’s loop before the goal was reached.'
  return null
}

/** The class of a verdict badge: good, bad or neutral. */
export function verdictTone(verdict: string | null, outcome: string | null): string {
  if (verdict === 'pass') return 'good'
  if (verdict === 'fail' || verdict === 'test-error' || verdict === 'error' || outcome === 'escalated')
    return 'bad'
  return 'neutral'
}

const DELIVERY: Record<string, string> = {
  sending: 'Sending…',
  pending: 'Pending: stored, not yet read by the agent',
  queued: 'Queued: in the agent’s context',
  dispatched: 'Dispatched: sent to the model',
  responded: 'Responded: the model answered',
  unknown: 'Unknown: the runtime cannot tell whether the model saw it',
  undelivered: 'Undelivered',
  failed: 'Not sent',
}

/** A message's delivery state in words (`undelivered` with its reason). */
export function deliveryText(state: string, reason?: string): string {
  const words = DELIVERY[state] ?? state
  return state === 'undelivered' && reason ? `${words}: ${reason}` : words
}

/** How a question closed. */
export function closedByText(closedBy: string | undefined): string {
  switch (closedBy) {
    case 'reply':
      return 'answered'
    case 'timeout':
      return 'timed out (the agent carried on without an answer)'
    case 'cancelled':
      return 'cancelled'
    case 'run_ended':
      return 'closed when the run ended'
    default:
      return closedBy ?? 'closed'
  }
}

/**
 * How a handoff pause ended, in words: `operator` is the one word the spec gives (handled by the callers, who
 * name the person); `run_ended` is the gateway seeing the run end mid-pause; any other word the runtime wrote
 * (`timeout`, `deadline`, …) means the pause ran out, and a word other than `timeout` is quoted.
 */
export function pauseEndText(endedBy: unknown): string {
  if (endedBy === 'run_ended') return 'ended with the run'
  const word = typeof endedBy === 'string' ? endedBy.slice(0, 40) : ''
  return word === '' || word === 'timeout' ? 'ran out' : `ran out (the runtime wrote “${word}”)`
}
