import type { TestContext } from 'node:test'
import { freePort } from '../cluster/redis-harness.ts'
import { type FakeKasm, type FakeKasmOptions, startFakeKasm } from '../fixtures/kasm-api.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { type CapturedLogs, captureLogs } from '../sessions/capture-logs.ts'

/** A fake Kasm, and a gateway in this process configured for it; both closed by `t.after`. */
export interface KasmSetup {
  readonly kasm: FakeKasm
  readonly gw: TestGateway
  readonly logs: CapturedLogs
  /** The port every session's runtime listens on, at its own container address. */
  readonly runtimePort: number
  /** A bearer for `ada`, role admin, every team. */
  readonly admin: string
  call(
    method: string,
    path: string,
    opts?: { token?: string; body?: unknown },
  ): Promise<{ status: number; text: string; body: Record<string, unknown> }>
}

/** The Kasm user launched sessions run as by default (GATEWAY_KASM_USER_ID) in these tests. */
export const GATEWAY_USER = '0c1d2e3f40516273849506a7b8c9d0e1'

export const API_KEY = 'bMjMwTT0JKUQ'
export const API_SECRET = 'KUNAvRw4KLHGmldBxhRUD5sAhWkvJVzS'

/** The gateway's environment for a fake Kasm (status upstreams on the runtime port, no sync unless asked). */
export function kasmEnv(kasm: FakeKasm, runtimePort: number, auth: 'body' | 'basic'): Record<string, string> {
  return {
    GATEWAY_KASM_API_URL: kasm.url,
    GATEWAY_KASM_API_KEY: API_KEY,
    GATEWAY_KASM_API_SECRET: API_SECRET,
    GATEWAY_KASM_API_AUTH: auth,
    GATEWAY_KASM_UPSTREAM: 'status',
    GATEWAY_KASM_STATUS_UPSTREAM: `http://{container_ip}:${runtimePort}/`,
    GATEWAY_KASM_SYNC_S: '0',
    GATEWAY_KASM_USER_ID: GATEWAY_USER,
  }
}

export async function kasmSetup(
  t: TestContext,
  opts: {
    kasm?: Partial<FakeKasmOptions>
    env?: Record<string, string>
    gatewayAuth?: 'body' | 'basic'
  } = {},
): Promise<KasmSetup> {
  const runtimePort = await freePort()
  const kasm = await startFakeKasm({ auth: 'body', runtimePort, ...opts.kasm })
  t.after(() => kasm.close())
  const logs = captureLogs('debug')
  const auth = opts.gatewayAuth ?? opts.kasm?.auth ?? 'body'
  const gw = await startGateway({ ...kasmEnv(kasm, runtimePort, auth), ...opts.env }, { logger: logs.logger })
  t.after(() => gw.close())
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] }, { expiresIn: '1h' })
  return {
    kasm,
    gw,
    logs,
    runtimePort,
    admin,
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { authorization: `Bearer ${o.token ?? admin}` }
      if (o.body !== undefined) headers['content-type'] = 'application/json'
      const res = await fetch(`${gw.url}${path}`, {
        method,
        headers,
        ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
      })
      const text = await res.text()
      return { status: res.status, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
    },
  }
}
