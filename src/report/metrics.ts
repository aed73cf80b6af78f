import { Counter, Histogram, type Registry } from 'prom-client'
import { VIAS } from '../audit/types.ts'
import { type Channel, HANDOFF_ENDS, type HandoffEnd, QUESTION_ENDS, type QuestionEnd } from './types.ts'

/**
 * The team report's metrics: labelled only by team and fixed words, never an id. Each question or handoff is
 * counted by the one replica whose write of it won (see recorder.ts), so the sum over replicas counts it once.
 */
export interface ReportMetrics {
  readonly opened: Counter<'team'>
  readonly closed: Counter<'team' | 'closed_by'>
  readonly answerSeconds: Histogram<'team' | 'via' | 'step'>
  readonly deadlineLeft: Histogram<'team'>
  readonly handoffs: Counter<'team' | 'ended_by'>
  readonly handoffWait: Histogram<'team'>
  /** Exports a team's series at 0 (every closing word, every channel), so an alert sees its first timeout. */
  initialise(team: string): void
}

/** The channels a histogram series exists for from the start (`unknown` appears with its first answer). */
const CHANNELS: readonly Channel[] = [...VIAS, 'unknown']

export function createReportMetrics(registry: Registry): ReportMetrics {
  const registers = [registry]
  const known = new Set<string>()
  const metrics: ReportMetrics = {
    opened: new Counter({
      name: 'krg_questions_opened_total',
      help: 'Questions runs asked people, by team',
      labelNames: ['team'],
      registers,
    }),
    closed: new Counter({
      name: 'krg_questions_closed_total',
      help: 'Questions closed, by team and how: reply, timeout, cancel, run_end (other: a word this gateway does not know)',
      labelNames: ['team', 'closed_by'],
      registers,
    }),
    answerSeconds: new Histogram({
      name: 'krg_question_answer_seconds',
      help: 'Time from a question to the reply that closed it, by team, channel (console, sidebar, api, slack, msteams; unknown: not through the gateway) and the highest escalation step sent before it (0: none beyond the first notice; 1 to 5; 6+)',
      labelNames: ['team', 'via', 'step'],
      buckets: [5, 10, 15, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800, 3600],
      registers,
    }),
    deadlineLeft: new Histogram({
      name: 'krg_question_deadline_left_seconds',
      help: 'Time left before the deadline when a question was answered, by team (0: answered at or after it)',
      labelNames: ['team'],
      buckets: [0, 5, 10, 30, 60, 90, 120, 180, 240, 300, 600, 1800, 3600],
      registers,
    }),
    handoffs: new Counter({
      name: 'krg_handoffs_total',
      help: 'Handoff pauses ended, by team and how: operator (a person finished), timeout (it ran out, whatever word the runtime wrote), run_end (the run ended first)',
      labelNames: ['team', 'ended_by'],
      registers,
    }),
    handoffWait: new Histogram({
      name: 'krg_handoff_wait_seconds',
      help: 'How long handoff pauses lasted, by team',
      labelNames: ['team'],
      buckets: [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14_400, 28_800],
      registers,
    }),
    initialise(team) {
      if (known.has(team)) return
      known.add(team)
      metrics.opened.inc({ team }, 0)
      for (const closedBy of QUESTION_ENDS) metrics.closed.inc({ team, closed_by: closedBy }, 0)
      for (const endedBy of HANDOFF_ENDS) metrics.handoffs.inc({ team, ended_by: endedBy }, 0)
      // Step 0 only: a later step's series appears with its first answer (7 steps x 5 channels of empty
      // histograms per team would be most of a scrape).
      for (const via of CHANNELS) metrics.answerSeconds.zero({ team, via, step: '0' })
      metrics.deadlineLeft.zero({ team })
      metrics.handoffWait.zero({ team })
    },
  }
  return metrics
}

/** The protocol's closing of a request (`closed_by`) in the metrics' words. */
export function questionEnd(closedBy: string): QuestionEnd {
  switch (closedBy) {
    case 'reply':
    case 'timeout':
      return closedBy
    case 'cancelled':
      return 'cancel'
    case 'run_ended':
      return 'run_end'
    default:
      return 'other'
  }
}

/**
 * How a handoff ended in the metrics' words: the run's end as the gateway saw it (`fromRecord` false), or the
 * runtime's escalation record, where only `operator` is a person and any other word is the pause running out.
 */
export function handoffEnd(endedBy: string, fromRecord: boolean): HandoffEnd {
  if (!fromRecord) return 'run_end'
  return endedBy === 'operator' ? 'operator' : 'timeout'
}
