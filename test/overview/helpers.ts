import type { TestContext } from 'node:test'
import { request } from 'undici'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { SessionSummary } from '../../src/summary/types.ts'
import { openSse, type SseClient } from '../events/helpers.ts'
import type { TestGateway } from '../helpers/gateway.ts'
import { WAIT_MS, waitFor } from '../helpers/wait.ts'

export const TOKEN = 'messaging-token-for-overview-tests'

/** A session frame of the overview stream. */
export interface Entry {
  kasmId: string
  team: string
  health: string
  summary: SessionSummary | null
  watchers: string[]
  claims: Record<string, { name: string; at: string }>
}

/** An overview stream and the latest entry per session it announced. */
export interface Overview {
  readonly sse: SseClient
  /** Latest entries (a `gone` removes one). */
  entries(): Map<string, Entry>
  /** Waits for an entry that passes `check`. */
  until(
    what: string,
    check: (entries: Map<string, Entry>) => boolean,
    timeoutMs?: number,
  ): Promise<Map<string, Entry>>
  close(): void
}

/** Opens `<gateway>/api/overview` with a bearer; closed by `t.after`. */
export async function openOverview(
  t: { after(fn: () => unknown): void },
  gw: { url: string },
  token: string,
): Promise<Overview> {
  const sse = await openSse(`${gw.url}/api/overview`, { authorization: `Bearer ${token}` })
  t.after(() => sse.close())
  const entries = (): Map<string, Entry> => {
    const out = new Map<string, Entry>()
    for (const e of sse.events) {
      const data = JSON.parse(e.data) as Entry & { kasmId: string }
      if (e.event === 'session') out.set(data.kasmId, data)
      else if (e.event === 'gone') out.delete(data.kasmId)
    }
    return out
  }
  return {
    sse,
    entries,
    until: (what, check, timeoutMs = WAIT_MS) =>
      waitFor(
        what,
        () => {
          const now = entries()
          return check(now) ? now : null
        },
        timeoutMs,
      ),
    close: () => sse.close(),
  }
}

/** A simulated runtime registered in the gateway as `kasmId` of `team`; closed by `t.after`. */
export async function addRuntime(
  t: TestContext,
  gw: TestGateway,
  kasmId: string,
  team: string,
  options: Parameters<typeof startSimulatedRuntime>[0] = {},
): Promise<SimulatedRuntime> {
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN, kasmId, deliveryStepMs: 20, ...options })
  t.after(() => rt.close())
  await gw.app.sessions.put({ kasmId, upstream: rt.url, team, messagingToken: TOKEN, source: 'admin' })
  return rt
}

/** Environment with short timers for the overview and event path. */
export const fastEnv: Record<string, string> = {
  GATEWAY_STREAM_LINGER_MS: '0',
  GATEWAY_UPSTREAM_RETRY_SCALE: '0.02',
  GATEWAY_CLOSED_POLL_MS: '100',
  GATEWAY_PING_INTERVAL_MS: '200',
  GATEWAY_STREAM_AUTH_RECHECK_MS: '1000',
  GATEWAY_PRESENCE_TTL_MS: '1000',
}

/** A JSON call with a bearer: the status and the parsed body (null when empty). */
export async function call(url: string, method: string, token: string, body?: unknown) {
  const res = await request(url, {
    method: method as 'GET',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.body.text()
  return { status: res.statusCode, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) }
}
