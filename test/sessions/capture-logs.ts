import { Writable } from 'node:stream'

/** Log lines written by a test gateway, read back as text and as parsed JSON records. */
export interface CapturedLogs {
  /** Pass as startGateway's `logger` option. */
  logger: { level: string; stream: Writable }
  /** Everything logged so far, one JSON line each. */
  text(): string
  records(): Array<Record<string, unknown>>
}

/** A pino destination over an in-memory stream, at `level` (default info). */
export function captureLogs(level = 'info'): CapturedLogs {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.length > 0) lines.push(line)
      callback()
    },
  })
  return {
    logger: { level, stream },
    text: () => lines.join('\n'),
    records: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  }
}

export { waitFor } from '../helpers/wait.ts'
