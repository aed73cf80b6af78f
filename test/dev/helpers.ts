import { type IncomingHttpHeaders, request } from 'node:http'
import type { TestContext } from 'node:test'
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import {
  type SimulatedRuntime,
  type SimulatedRuntimeOptions,
  startSimulatedRuntime,
} from '../../src/dev/runtime/index.ts'

export const MESSAGING = 'messaging-token-for-tests'
export const SESSION = 'session-token-for-tests'
export const TOKEN_HEADER = 'x-kasm-runtime-session-token'

/** A simulated runtime with both tokens, closed after the test. */
export async function startRuntime(
  t: TestContext,
  options: SimulatedRuntimeOptions = {},
): Promise<SimulatedRuntime> {
  const runtime = await startSimulatedRuntime({
    messagingToken: MESSAGING,
    sessionToken: SESSION,
    deliveryStepMs: 20,
    ...options,
  })
  t.after(() => runtime.close())
  return runtime
}

export { waitFor } from '../helpers/wait.ts'

/** An open /events response read with node:http: the raw text, parsed frames and comments. */
export interface RawStream {
  status: number
  headers: IncomingHttpHeaders
  /** Everything received so far, byte for byte. */
  readonly raw: string
  readonly events: EventSourceMessage[]
  readonly comments: string[]
  /** The response ended (or the socket closed). */
  readonly ended: boolean
  /** How the stream ended: 'end' (server ended it cleanly) or 'aborted' (socket destroyed). */
  readonly endedBy: 'end' | 'aborted' | null
  close(): void
}

/** Opens `path` on the runtime and resolves once headers arrived (a non-200 body is collected too). */
export function openStream(
  t: TestContext,
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { headers }, (res) => {
      let raw = ''
      const events: EventSourceMessage[] = []
      const comments: string[] = []
      let endedBy: 'end' | 'aborted' | null = null
      const parser = createParser({
        onEvent: (event) => events.push(event),
        onComment: (comment) => comments.push(comment),
      })
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        raw += chunk
        parser.feed(chunk)
      })
      res.on('end', () => {
        endedBy ??= 'end'
      })
      res.on('aborted', () => {
        endedBy ??= 'aborted'
      })
      res.on('error', () => {
        endedBy ??= 'aborted'
      })
      res.on('close', () => {
        endedBy ??= res.complete ? 'end' : 'aborted'
      })
      const stream: RawStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        get raw() {
          return raw
        },
        events,
        comments,
        get ended() {
          return endedBy !== null
        },
        get endedBy() {
          return endedBy
        },
        close: () => req.destroy(),
      }
      t.after(() => req.destroy())
      resolve(stream)
    })
    req.on('error', (error) => {
      if (!req.destroyed || (error as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(error)
    })
    req.end()
  })
}

/** A JSON request with an optional token header; returns status, headers and the parsed body. */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {}
  if (opts.token !== undefined) headers[TOKEN_HEADER] = opts.token
  if (opts.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(new URL(path, base), {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  })
  const text = await res.text()
  return {
    status: res.status,
    headers: res.headers,
    body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>),
  }
}

/** The type and parsed data of each frame. */
export function frames(
  stream: RawStream,
): Array<{ id: string | undefined; event: string | undefined; data: Record<string, unknown> }> {
  return stream.events.map((event) => ({
    id: event.id,
    event: event.event,
    data: JSON.parse(event.data) as Record<string, unknown>,
  }))
}
