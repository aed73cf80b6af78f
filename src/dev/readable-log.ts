import type { DestinationStream } from 'pino'

/** pino's levels by number, as a person reads them. */
const LEVELS: Readonly<Record<number, string>> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
}

/** Fields the line's start already says, or that every line of the process carries. */
const SAID = new Set(['level', 'time', 'msg', 'err', 'service', 'version', 'pid', 'hostname'])

const pad = (n: number): string => String(n).padStart(2, '0')

/** A field's value: a plain word as it is, anything else as JSON (quoted, so spaces and `=` stay readable). */
function shown(value: unknown): string {
  return typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
}

/**
 * One log record (a JSON line as pino writes it) as a person at a terminal reads it: the local time, the level,
 * the message, then the record's own fields as `key=value`; an error's stack follows, indented. Anything that
 * is not a record passes as it came.
 */
export function readableLine(line: string): string {
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return line
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return line
  const r = record as Record<string, unknown>
  const at = new Date(typeof r.time === 'string' || typeof r.time === 'number' ? r.time : Number.NaN)
  const time = Number.isNaN(at.getTime())
    ? '--:--:--'
    : `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`
  const level = (typeof r.level === 'number' ? LEVELS[r.level] : undefined) ?? String(r.level)
  const fields = Object.entries(r)
    .filter(([key]) => !SAID.has(key))
    .map(([key, value]) => `${key}=${shown(value)}`)
  const message = typeof r.msg === 'string' ? r.msg : ''
  let out = `${time} ${level.padEnd(5)} ${message}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}\n`
  const err = r.err as { message?: unknown; stack?: unknown } | undefined
  const trace = typeof err?.stack === 'string' ? err.stack : err?.message
  if (trace !== undefined) out += `${String(trace).replace(/^/gm, '    ')}\n`
  return out
}

/**
 * The demo's log destination: every record as a {@link readableLine} on `out`. A terminal running `npm start`
 * is a person reading, not a log index; production keeps JSON lines (src/logger.ts).
 */
export function readableLog(out: NodeJS.WritableStream): DestinationStream {
  return {
    write(line: string) {
      out.write(readableLine(line))
    },
  }
}
