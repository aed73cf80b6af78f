import { inTime, waitedS } from './stats.ts'
import type { ReportRecord } from './types.ts'

/**
 * The report's records as CSV (RFC 4180: comma-separated, CRLF, a field quoted when it holds a quote, a
 * comma, a line break or surrounding spaces, quotes doubled), one row per closed question or ended handoff,
 * with a UTF-8 byte order mark so a spreadsheet reads names in any script. A text cell that a spreadsheet
 * would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return: CSV injection) gets
 * a leading `'`, so titles and names from a runtime or an IdP are only ever shown.
 */

export const CSV_COLUMNS = [
  'kind',
  'team',
  'kasm_id',
  'run',
  'request_id',
  'title',
  'opened_at',
  'closed_at',
  'deadline',
  'closed_by',
  'in_time',
  'seconds',
  'via',
  'sub',
  'name',
] as const

type Cell = string | number | null

const FORMULA = /^[=+\-@\t\r]/
const NEEDS_QUOTES = /[",\r\n]|^\s|\s$/

/** One cell: numbers as they are, text guarded against formulas and quoted when it must be. */
export function csvCell(value: Cell): string {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  const text = FORMULA.test(value) ? `'${value}` : value
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

function row(record: ReportRecord): Cell[] {
  const seconds = Math.round((record.kind === 'handoff' ? record.waitS : waitedS(record)) * 10) / 10
  const common = [record.team, record.kasmId, record.run] as const
  const who = [record.via, record.sub, record.name] as const
  if (record.kind === 'handoff') {
    return [
      'handoff',
      ...common,
      null,
      record.reason,
      record.openedAt,
      record.closedAt,
      null,
      record.endedBy,
      null,
      seconds,
      ...who,
    ]
  }
  const answered = record.closedBy === 'reply'
  return [
    'question',
    ...common,
    record.requestId,
    record.title,
    record.openedAt,
    record.closedAt,
    record.deadline,
    record.closedBy,
    answered ? (inTime(record) ? 'yes' : 'no') : null,
    seconds,
    ...who,
  ]
}

/** The CSV file of `records`, header first. */
export function reportCsv(records: readonly ReportRecord[]): string {
  const lines = [CSV_COLUMNS.join(','), ...records.map((r) => row(r).map(csvCell).join(','))]
  return `\uFEFF${lines.join('\r\n')}\r\n`
}
