import {
  type Channel,
  filedAt,
  type HandoffRecord,
  type OpenedRecord,
  type QuestionRecord,
  questionKey,
  type ReportRecord,
  stepLabel,
} from './types.ts'

/**
 * The report's numbers, computed from the records of a window: per team, per person, over every team shown,
 * with the timeouts and handoffs listed and answers counted per time bucket for the page's chart. Pure: the
 * API route calls it with what the store returned.
 */

/** The windows the report offers, with the width of the chart's buckets. */
export const WINDOWS = {
  '24h': { ms: 24 * 3600 * 1000, bucketMs: 3600 * 1000 },
  '7d': { ms: 7 * 24 * 3600 * 1000, bucketMs: 6 * 3600 * 1000 },
} as const

export type ReportWindow = keyof typeof WINDOWS

export function isReportWindow(value: unknown): value is ReportWindow {
  return typeof value === 'string' && Object.hasOwn(WINDOWS, value)
}

/**
 * Questions of a group (a team, a person, everyone shown). Every question counts once, in exactly one of
 * `inTime`, `late`, `timeouts`, `cancelled`, `runEnded`, `other` and `stillOpen`, which add up to `questions`.
 */
export interface QuestionStats {
  /** The questions that closed in the window, and those asked in it that are still open. */
  readonly questions: number
  /** inTime + late. */
  readonly answered: number
  /** Answered at or before the deadline (or with no deadline). */
  readonly inTime: number
  /** Answered after the deadline (a runtime that kept waiting). */
  readonly late: number
  readonly timeouts: number
  readonly cancelled: number
  readonly runEnded: number
  /** Closed in a way this gateway has no word for (a newer runtime's `closed_by`). */
  readonly other: number
  /** Asked in the window and not closed yet, in a session still registered. */
  readonly stillOpen: number
  /** answered + timeouts: the questions that waited for a person until they closed (the share's denominator). */
  readonly waited: number
  /** inTime / waited; null: none waited. */
  readonly inTimeShare: number | null
  /** Time to answer (s), nearest rank; null without answers. */
  readonly medianAnswerS: number | null
  readonly p90AnswerS: number | null
  /** Answers per channel. */
  readonly via: Readonly<Record<Channel, number>>
  /** How the answered and timed-out questions ended by escalation step. */
  readonly bySteps: StepStats
}

/**
 * How questions ended by the highest escalation step sent before they closed, by step (`0`: before any
 * escalation, only the first notice; `1` to `5`; `6+`). Only the steps that occur are named.
 */
export interface StepStats {
  /** Answered: `0` before any escalation, `N` after step N. */
  readonly answered: Readonly<Record<string, number>>
  /** Timed out, by the last step sent (every step whose time came before the deadline, unless a claim held them). */
  readonly timedOut: Readonly<Record<string, number>>
}

/** Handoffs of a group. */
export interface HandoffStats {
  readonly handoffs: number
  /** Ended by a person ("I'm done, finish"). */
  readonly byPerson: number
  /** The pause ran out with nobody finishing it (the runtime ended it with a word other than `operator`). */
  readonly ranOut: number
  /** The run ended first, as the gateway saw it. */
  readonly runEnded: number
  readonly medianWaitS: number | null
  readonly p90WaitS: number | null
}

/** One person's part: what they answered and the handoffs they finished. */
export interface PersonStats {
  readonly sub: string
  readonly name: string | null
  readonly questions: QuestionStats
  readonly handoffs: HandoffStats
}

export interface TeamStats {
  readonly team: string
  readonly questions: QuestionStats
  readonly handoffs: HandoffStats
  readonly people: readonly PersonStats[]
}

/** A question nobody answered in time, with what the page needs to link its session. */
export interface TimeoutItem {
  readonly team: string
  readonly kasmId: string
  readonly run: string
  readonly requestId: string
  readonly title: string
  readonly openedAt: string
  readonly closedAt: string
  readonly deadline: string | null
  /** The last escalation step sent before it timed out (0: only the first notice). */
  readonly step: number
}

export interface HandoffItem {
  readonly team: string
  readonly kasmId: string
  readonly run: string
  readonly reason: string
  readonly openedAt: string
  readonly closedAt: string
  readonly waitS: number
  readonly endedBy: HandoffRecord['endedBy']
  readonly name: string | null
}

/** Answers in one bucket of the chart. */
export interface SeriesBucket {
  /** ISO 8601: the bucket's start. */
  readonly start: string
  readonly inTime: number
  readonly late: number
  readonly timeouts: number
}

/** What `GET <base>api/report` answers. */
export interface Report {
  readonly window: ReportWindow
  readonly from: string
  readonly to: string
  readonly bucketS: number
  /** Over every team shown. */
  readonly all: TeamStats
  readonly teams: readonly TeamStats[]
  readonly series: readonly SeriesBucket[]
  /** Newest first, at most {@link LISTED} of each (`all` counts them all; the CSV lists every record). */
  readonly timeouts: readonly TimeoutItem[]
  readonly handoffs: readonly HandoffItem[]
}

/** Items listed per kind (the CSV has every record). */
export const LISTED = 100

const CHANNELS: readonly Channel[] = ['console', 'sidebar', 'api', 'slack', 'msteams', 'unknown']

/** The value at rank ceil(p·n) of the sorted values (nearest rank); null for none. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null
  const rank = Math.max(1, Math.ceil(p * sorted.length))
  return sorted[Math.min(rank, sorted.length) - 1] as number
}

/** Whether an answered question was answered at or before its deadline. */
export function inTime(record: QuestionRecord): boolean {
  return record.deadline === null || record.closedAt <= record.deadline
}

/**
 * The questions of `records` asked and not closed (no closing among `records`), in a session still registered
 * (`live`): one whose session was removed never closes here.
 */
export function stillOpen(
  records: readonly ReportRecord[],
  live: (kasmId: string) => boolean,
): OpenedRecord[] {
  const closed = new Set<string>()
  for (const r of records) if (r.kind === 'question') closed.add(questionKey(r))
  return records.filter(
    (r): r is OpenedRecord => r.kind === 'opened' && live(r.kasmId) && !closed.has(questionKey(r)),
  )
}

/** Seconds from a record's opening to its closing. */
export function waitedS(record: QuestionRecord | HandoffRecord): number {
  return Math.max(0, Date.parse(record.closedAt) - Date.parse(record.openedAt)) / 1000
}

function round(value: number | null): number | null {
  return value === null ? null : Math.round(value * 10) / 10
}

function questionStats(records: readonly QuestionRecord[], open: number): QuestionStats {
  const via = Object.fromEntries(CHANNELS.map((c) => [c, 0])) as Record<Channel, number>
  const times: number[] = []
  let onTime = 0
  const ends = { timeout: 0, cancel: 0, run_end: 0, other: 0 }
  const answeredBy: Record<string, number> = {}
  const timedOutBy: Record<string, number> = {}
  const count = (into: Record<string, number>, r: QuestionRecord): void => {
    const step = stepLabel(r.step)
    into[step] = (into[step] ?? 0) + 1
  }
  for (const r of records) {
    if (r.closedBy === 'timeout') count(timedOutBy, r)
    if (r.closedBy === 'reply') {
      count(answeredBy, r)
      times.push(waitedS(r))
      if (inTime(r)) onTime++
      via[r.via ?? 'unknown']++
    } else ends[r.closedBy]++
  }
  times.sort((a, b) => a - b)
  const waited = times.length + ends.timeout
  return {
    questions: records.length + open,
    answered: times.length,
    inTime: onTime,
    late: times.length - onTime,
    timeouts: ends.timeout,
    cancelled: ends.cancel,
    runEnded: ends.run_end,
    other: ends.other,
    stillOpen: open,
    waited,
    inTimeShare: waited === 0 ? null : Math.round((onTime / waited) * 1000) / 1000,
    medianAnswerS: round(percentile(times, 0.5)),
    p90AnswerS: round(percentile(times, 0.9)),
    via,
    bySteps: { answered: answeredBy, timedOut: timedOutBy },
  }
}

function handoffStats(records: readonly HandoffRecord[]): HandoffStats {
  const waits = records.map((r) => r.waitS).sort((a, b) => a - b)
  return {
    handoffs: records.length,
    byPerson: records.filter((r) => r.endedBy === 'operator').length,
    ranOut: records.filter((r) => r.endedBy === 'timeout').length,
    runEnded: records.filter((r) => r.endedBy === 'run_end').length,
    medianWaitS: round(percentile(waits, 0.5)),
    p90WaitS: round(percentile(waits, 0.9)),
  }
}

/** The questions and handoffs among `records` (closings and endings), and the `open` questions. */
function ownStats(
  records: readonly (QuestionRecord | HandoffRecord)[],
  open: number,
): Pick<TeamStats, 'questions' | 'handoffs'> {
  return {
    questions: questionStats(
      records.filter((r): r is QuestionRecord => r.kind === 'question'),
      open,
    ),
    handoffs: handoffStats(records.filter((r): r is HandoffRecord => r.kind === 'handoff')),
  }
}

/** A group's numbers (its closings and endings, and its questions still open) and each person's in it, the busiest first. */
function groupStats(
  team: string,
  records: readonly (QuestionRecord | HandoffRecord)[],
  open: readonly OpenedRecord[],
): TeamStats {
  const people = new Map<string, { name: string | null; records: (QuestionRecord | HandoffRecord)[] }>()
  for (const r of records) {
    if (r.sub === null) continue
    const person = people.get(r.sub) ?? { name: null, records: [] }
    person.name = r.name ?? person.name
    person.records.push(r)
    people.set(r.sub, person)
  }
  const busy = (p: PersonStats): number => p.questions.answered + p.handoffs.handoffs
  return {
    team,
    ...ownStats(records, open.length),
    people: [...people]
      .map(([sub, p]): PersonStats => ({ sub, name: p.name, ...ownStats(p.records, 0) }))
      .sort((a, b) => busy(b) - busy(a) || a.sub.localeCompare(b.sub)),
  }
}

/**
 * The report of `records` (every one filed in the window; the store's answer) for `teams`, over the window
 * ending `now`; `live` says whether a session is still registered (its open questions may still close).
 */
export function buildReport(
  window: ReportWindow,
  teams: readonly string[],
  records: readonly ReportRecord[],
  now: number,
  live: (kasmId: string) => boolean,
): Report {
  const { ms, bucketMs } = WINDOWS[window]
  // Buckets aligned to whole hours (UTC) so the chart's bars do not shift with every reload.
  const end = Math.ceil(now / bucketMs) * bucketMs
  const start = end - ms
  const since = now - ms
  const filed = records.filter((r) => Date.parse(filedAt(r)) >= since)
  const open = stillOpen(filed, live)
  const shown = filed.filter((r): r is QuestionRecord | HandoffRecord => r.kind !== 'opened')
  const series = Array.from({ length: ms / bucketMs }, (_, i) => ({
    start: new Date(start + i * bucketMs).toISOString(),
    inTime: 0,
    late: 0,
    timeouts: 0,
  }))
  const timeouts: TimeoutItem[] = []
  const handoffs: HandoffItem[] = []
  for (const r of shown) {
    const bucket = series[Math.floor((Date.parse(r.closedAt) - start) / bucketMs)]
    if (r.kind === 'handoff') {
      handoffs.push({
        team: r.team,
        kasmId: r.kasmId,
        run: r.run,
        reason: r.reason,
        openedAt: r.openedAt,
        closedAt: r.closedAt,
        waitS: r.waitS,
        endedBy: r.endedBy,
        name: r.name ?? r.sub,
      })
      continue
    }
    if (r.closedBy === 'reply' && bucket !== undefined) {
      if (inTime(r)) bucket.inTime++
      else bucket.late++
    } else if (r.closedBy === 'timeout') {
      if (bucket !== undefined) bucket.timeouts++
      const { team, kasmId, run, requestId, title, openedAt, closedAt, deadline } = r
      timeouts.push({ team, kasmId, run, requestId, title, openedAt, closedAt, deadline, step: r.step ?? 0 })
    }
  }
  return {
    window,
    from: new Date(since).toISOString(),
    to: new Date(now).toISOString(),
    bucketS: bucketMs / 1000,
    all: groupStats('', shown, open),
    teams: teams.map((team) =>
      groupStats(
        team,
        shown.filter((r) => r.team === team),
        open.filter((r) => r.team === team),
      ),
    ),
    series,
    timeouts: timeouts.reverse().slice(0, LISTED),
    handoffs: handoffs.reverse().slice(0, LISTED),
  }
}
