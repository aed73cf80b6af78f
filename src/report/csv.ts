import { inTime, waitedS } from './stats.ts'
import type { ReportRecord } from './types.ts'

/**
 * The report's records as CSV (RFC 4180: comma-separated, CRLF, quotes doubled), one row per closed question
 * or ended handoff, with a UTF-8 byte order mark so a spreadsheet reads names in any script. Against CSV
 * injection (titles and names come from a runtime or an IdP), every text cell is quoted, and each part of it
 * that a spreadsheet could run as a formula gets a leading `'`: the cell's start and whatever follows a `,` or
 * a `;` (a spreadsheet in a locale whose separator is `;` splits `x;=1+1` into two cells), when it starts,
 * after spaces or quotes, with `=`, `+`, `-`, `@`, a tab or a carriage return. A person still reads the text.
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
  'runtime_ended_by',
] as const

type Cell = string | number | null

/**
 * A formula start: the start of a part a spreadsheet may read as a cell of its own (after a separator, or a
 * line break for a reader that ignores quotes), then any spaces or quotes (which a lenient reader skips) before `=`, `+`, `-`, `@`, a tab or a carriage return.
 */
const FORMULA = /(^|[,;\r\n])([ "]*)(?=[=+\-@\t\r])/g

/** One cell: a number as it is; text with every formula start guarded, always quoted. */
export function csvCell(value: Cell): string {
  if (value === null) return ''
  if (typeof value === 'number') return String(value)
  return `"${value.replace(FORMULA, "$1$2'").replaceAll('"', '""')}"`
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
      record.runtimeEndedBy ?? null,
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
    null,
  ]
}

/** The CSV file of `records`, header first. */
export function reportCsv(records: readonly ReportRecord[]): string {
  const lines = [CSV_COLUMNS.join(','), ...records.map((r) => row(r).map(csvCell).join(','))]
  return `\uFEFF${lines.join('\r\n')}\r\n`
}
