/**
 * The team report's records: one small record per question opened, per question closed and per handoff ended
 * of a session the gateway watched, with who answered and through what (from the audit log). Never a field
 * value, a message's text or a token: ids, a clipped title or reason, times and fixed words.
 */

import type { Via } from '../audit/types.ts'

/** How a question closed, in the metrics' words (the protocol's `cancelled` and `run_ended` shortened). */
export type QuestionEnd = 'reply' | 'timeout' | 'cancel' | 'run_end' | 'other'

/**
 * How a handoff pause ended: a person finished it (`operator`, the one word the spec names), the gateway saw
 * the run end first (`run_end`), or it ran out (`timeout`): the runtime ended it with any other word, as its
 * pause lasts until the run's deadline or `runner.escalation_pause_s` (ours writes `timeout`, another
 * `deadline`).
 */
export type HandoffEnd = 'operator' | 'timeout' | 'run_end'

/** Through what an answer came: an audited channel, or `unknown` when no reply of the gateway's closed it. */
export type Channel = Via | 'unknown'

export const QUESTION_ENDS: readonly QuestionEnd[] = ['reply', 'timeout', 'cancel', 'run_end', 'other']
export const HANDOFF_ENDS: readonly HandoffEnd[] = ['operator', 'timeout', 'run_end']

/** What every record carries. */
interface RecordKey {
  /** Unique per record, the same on every replica: the idempotency key of the write. */
  readonly id: string
  readonly team: string
  readonly kasmId: string
  readonly run: string
  /** ISO 8601: when the question opened or the pause started. */
  readonly openedAt: string
}

/** What a closed question and an ended handoff carry. */
interface RecordBase extends RecordKey {
  /** ISO 8601: when it closed or ended. */
  readonly closedAt: string
  /** Who answered or ended it through the gateway; null when nobody did (a timeout, or outside the gateway). */
  readonly sub: string | null
  readonly name: string | null
  /** The channel of that person's answer or "I'm done"; null when no person closed it. */
  readonly via: Channel | null
}

/** A question the run asked, once it closed. */
export interface QuestionRecord extends RecordBase {
  readonly kind: 'question'
  readonly requestId: string
  /** The question's title, clipped. */
  readonly title: string
  /** ISO 8601, or null when the question had none. */
  readonly deadline: string | null
  readonly closedBy: QuestionEnd
  /**
   * The highest escalation step sent when it closed (0: only the first notice, or no escalation at all):
   * from the question's escalation record on the session board. Absent from records written before it was
   * kept (read as 0).
   */
  readonly step?: number
}

/** The largest step a metric label or a report column names on its own; later steps are `6+`. */
export const MAX_STEP_LABEL = 5

/** A step as a label: `0` to `5`, then `6+` (a metric's cardinality stays bounded whatever the notify file). */
export function stepLabel(step: number | undefined): string {
  const n = step ?? 0
  return n > MAX_STEP_LABEL ? `${MAX_STEP_LABEL + 1}+` : String(Math.max(0, Math.floor(n)))
}

/** A handoff pause, once it ended. */
export interface HandoffRecord extends RecordBase {
  readonly kind: 'handoff'
  /** Why the agent escalated, clipped. */
  readonly reason: string
  readonly endedBy: HandoffEnd
  /**
   * The runtime's own `ended_by`, clipped (`unknown` when its record had none); null when the gateway saw the
   * run end first. Absent from records written before it was kept.
   */
  readonly runtimeEndedBy?: string | null
  /** How long the pause lasted (the runtime's `paused_s`, or from the times). */
  readonly waitS: number
}

/**
 * A question, as it opened: filed under its opening, so a report knows the questions asked in its window that
 * have not closed (no {@link QuestionRecord} of the same session, run and request).
 */
export interface OpenedRecord extends RecordKey {
  readonly kind: 'opened'
  readonly requestId: string
  /** The question's title, clipped. */
  readonly title: string
  /** ISO 8601, or null when the question had none. */
  readonly deadline: string | null
}

export type ReportRecord = QuestionRecord | HandoffRecord | OpenedRecord

/** When a record is filed (what a window and the retention go by): its closing, or an opening's time. */
export function filedAt(record: ReportRecord): string {
  return record.kind === 'opened' ? record.openedAt : record.closedAt
}

/** Oldest filed first (a sort's comparison). */
export function byFiling(a: ReportRecord, b: ReportRecord): number {
  const x = filedAt(a)
  const y = filedAt(b)
  return x < y ? -1 : x > y ? 1 : 0
}

/** The same for the opening and the closing of one question: its session, run and request. */
export function questionKey(record: QuestionRecord | OpenedRecord): string {
  return JSON.stringify([record.kasmId, record.run, record.requestId])
}

/**
 * Where report records are kept, for `GATEWAY_REPORT_RETENTION_DAYS`: in memory (embedded) or in Redis, a
 * sorted set per team scored by the filing time. Every write is idempotent by its key, so replicas racing
 * for the same question, or one taking another's session over, write it once.
 */
export interface ReportStore {
  /** Adds a record unless one with its id was added (claimed and stored at once): true when this call did. */
  add(record: ReportRecord): Promise<boolean>
  /** The records of `teams` (every team: null) filed at or after `since` (ms, see {@link filedAt}), oldest first. */
  list(teams: readonly string[] | null, since: number): Promise<ReportRecord[]>
  /** Teams with records still kept. */
  teams(): Promise<string[]>
}
