import { inTime, stillOpen, waitedS } from './stats.ts'
import type { ReportRecord } from './types.ts'

/**
 * The report's records as CSV (RFC 4180: comma-separated, CRLF, quotes doubled), one row per question (closed
 * or still open) or ended handoff, with a UTF-8 byte order mark so a spreadsheet reads names in any script. Against CSV
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
  'step',
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
  const common = [record.team, record.kasmId, record.run] as const
  if (record.kind === 'opened') {
    // Still open: nothing closed it, nobody answered it, yet.
    const question = [record.requestId, record.title, record.openedAt, null, record.deadline] as const
    return ['question', ...common, ...question, 'open', null, null, null, null, null, null, null]
  }
  const seconds = Math.round((record.kind === 'handoff' ? record.waitS : waitedS(record)) * 10) / 10
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
      null,
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
    record.step ?? null,
  ]
}

/**
 * The CSV file of `records` (the store's answer for a window), header first: every closing and ending, and a
 * row (`closed_by` `open`) for each question asked and still open in a session `live` says is registered.
 */
export function reportCsv(records: readonly ReportRecord[], live: (kasmId: string) => boolean): string {
  const open = new Set(stillOpen(records, live))
  const rows = records.filter((r) => r.kind !== 'opened' || open.has(r))
  const lines = [CSV_COLUMNS.join(','), ...rows.map((r) => row(r).map(csvCell).join(','))]
  return `\uFEFF${lines.join('\r\n')}\r\n`
}
