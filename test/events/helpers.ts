import http from 'node:http'
import type { TestContext } from 'node:test'
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { FastifyInstance } from 'fastify'
import { Counter, Registry } from 'prom-client'
import {
  type SimulatedRuntime,
  type SimulatedRuntimeOptions,
  startSimulatedRuntime,
} from '../../src/dev/runtime/index.ts'
import { createEventMetrics, type EventMetrics } from '../../src/events/metrics.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor as until, WAIT_MS } from '../helpers/wait.ts'

export const TOKEN = 'messaging-token-for-event-tests'

/** Environment that makes the event path's timers short enough for tests. */
export const fastEventEnv: Record<string, string> = {
  GATEWAY_STREAM_LINGER_MS: '0',
  GATEWAY_UPSTREAM_RETRY_SCALE: '0.02',
  GATEWAY_CLOSED_POLL_MS: '100',
  GATEWAY_PING_INTERVAL_MS: '200',
  GATEWAY_STREAM_AUTH_RECHECK_MS: '1000',
}

export interface Stack {
  rt: SimulatedRuntime
  gw: TestGateway
  /** A bearer for operator alice, team `*`. */
  token: string
  /** `${gw.url}/desktop/s1/mcp/events` */
  eventsUrl: string
}

/** A simulated runtime registered as session `kasmId` (team blue) in `app`; closed by `t.after`. */
export async function addRuntimeSession(
  t: TestContext,
  app: FastifyInstance,
  kasmId = 's1',
  runtime: SimulatedRuntimeOptions = {},
): Promise<SimulatedRuntime> {
  const rt = await startSimulatedRuntime({
    messagingToken: TOKEN,
    observeTokenRequired: true,
    pingIntervalMs: 5000,
    ...runtime,
  })
  t.after(() => rt.close())
  await app.sessions.put({ kasmId, upstream: rt.url, team: 'blue', messagingToken: TOKEN, source: 'admin' })
  return rt
}

/** A simulated runtime registered as session `s1` in a real gateway; both closed by `t.after`. */
export async function startStack(
  t: TestContext,
  env: Record<string, string> = {},
  runtime: SimulatedRuntimeOptions = {},
  gatewayOpts: Parameters<typeof startGateway>[1] = {},
): Promise<Stack> {
  const gw = await startGateway({ ...fastEventEnv, ...env }, gatewayOpts)
  t.after(() => gw.close())
  const rt = await addRuntimeSession(t, gw.app, 's1', runtime)
  return { rt, gw, token: await bearer(), eventsUrl: `${gw.url}/desktop/s1/mcp/events` }
}

export { until }

/** A raw node:http SSE reader (parsing with eventsource-parser), recording everything it receives. */
export interface SseClient {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  /** Every event, in order. */
  readonly events: EventSourceMessage[]
  /** Every comment (`run <id>`, `ping`), in order. */
  readonly comments: string[]
  /** All bytes of the body as text. */
  raw: string
  /** The body without its `: ping` heartbeats (which may arrive anywhere between frames). */
  text(): string
  /** The body as JSON when the answer was not 200. */
  readonly body: unknown
  /** Resolves when the stream ends: 'end' for a clean end, 'error' for a reset. */
  readonly ended: Promise<'end' | 'error'>
  readonly isEnded: boolean
  /** `run:seq` ids of the events received. */
  ids(): string[]
  /** Stops reading (the socket stays open, the kernel buffers fill). */
  pause(): void
  resume(): void
  close(): void
}

/** Opens `url` with `headers`; resolves once the response head (and, for an error, its body) arrived. */
export function openSse(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false })
    req.on('error', reject)
    req.on('response', (res) => {
      const events: EventSourceMessage[] = []
      const comments: string[] = []
      let endedFlag = false
      let markEnded: (how: 'end' | 'error') => void = () => {}
      const ended = new Promise<'end' | 'error'>((r) => {
        markEnded = (how) => {
          if (endedFlag) return
          endedFlag = true
          r(how)
        }
      })
      const parser = createParser({
        onEvent: (e) => events.push(e),
        onComment: (c) => comments.push(c),
      })
      const client: SseClient = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        comments,
        raw: '',
        text: () => client.raw.replaceAll(': ping\n\n', ''),
        body: undefined,
        ended,
        get isEnded() {
          return endedFlag
        },
        ids: () => events.filter((e) => e.id !== undefined).map((e) => e.id as string),
        pause: () => res.pause(),
        resume: () => res.resume(),
        close: () => {
          req.destroy()
          markEnded('error')
        },
      }
      res.on('end', () => markEnded('end'))
      res.on('error', () => markEnded('error'))
      res.on('close', () => markEnded(res.complete ? 'end' : 'error'))
      if (client.status !== 200) {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => {
          text += d
        })
        res.on('end', () => {
          ;(client as { body: unknown }).body = text === '' ? undefined : JSON.parse(text)
          resolve(client)
        })
        return
      }
      const decoder = new TextDecoder()
      res.on('data', (chunk: Buffer) => {
        const text = decoder.decode(chunk, { stream: true })
        client.raw += text
        parser.feed(text)
      })
      resolve(client)
    })
  })
}

/** The `id` of every event the runtime emitted in `run` from `from` to `to`. */
export function idRange(run: string, from: number, to: number): string[] {
  const out: string[] = []
  for (let seq = from; seq <= to; seq++) out.push(`${run}:${seq}`)
  return out
}

/** Waits until `client` holds `count` events. */
export async function eventsAtLeast(client: SseClient, count: number, timeoutMs = WAIT_MS): Promise<void> {
  await until(
    `${count} events (have ${client.events.length})`,
    () => client.events.length >= count,
    timeoutMs,
  )
}

/** The event metrics on a registry of their own (the shared counters included, as the app has them). */
export function eventMetrics(): { registry: Registry; metrics: EventMetrics } {
  const registry = new Registry()
  const shared = (name: string, label: string) =>
    new Counter({ name, help: name, labelNames: [label], registers: [registry] })
  return {
    registry,
    metrics: createEventMetrics(
      registry,
      shared('krg_upstream_errors_total', 'reason'),
      shared('krg_token_echoes_total', 'where'),
    ),
  }
}
