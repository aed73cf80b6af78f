import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import type { AuditRecord } from '../../src/audit/types.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { startProxy } from '../upstream/support.ts'

/**
 * Requests without a credential are limited per client address (GATEWAY_ANONYMOUS_RATE_LIMIT_MAX per
 * GATEWAY_RATE_LIMIT_WINDOW_MS) before anything else looks at them: 429 `anonymous_rate_limited` with
 * Retry-After, counted and logged once in a while rather than audited one by one.
 */

const ATTACKER = '198.51.100.7'

function postMessage(url: string, headers: Record<string, string>) {
  return request(`${url}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{"run":"r1","key":"k","text":"hi"}',
  })
}

async function statuses(url: string, n: number, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await postMessage(url, headers)
    await res.body.dump()
    out.push(res.statusCode)
  }
  return out
}

async function limitedCount(url: string): Promise<number> {
  const res = await request(`${url}/metrics`)
  return sampleValue(parseExposition(await res.body.text()), 'krg_anonymous_requests_limited_total') ?? 0
}

test('an address over its budget of anonymous requests gets 429 at once; credentials, probes and others pass', async (t) => {
  const { gw, auth, logs } = await startProxy(t, {
    GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: '20',
    GATEWAY_TRUST_PROXY: 'loopback',
  })
  const from = { 'x-forwarded-for': ATTACKER }
  const got = await statuses(gw.url, 30, from)
  assert.deepEqual(got, [...Array(20).fill(401), ...Array(10).fill(429)])

  const refused = await postMessage(gw.url, from)
  assert.equal(refused.statusCode, 429)
  const seconds = Number(refused.headers['retry-after'])
  assert.ok(seconds >= 1 && seconds <= 60, `Retry-After ${refused.headers['retry-after']}`)
  const body = (await refused.body.json()) as { error: string; message: string }
  assert.equal(body.error, 'anonymous_rate_limited')
  assert.match(body.message, /without a credential/)

  // A credential is not anonymous: the same address is served.
  const signedIn = await postMessage(gw.url, { ...from, authorization: auth.operator })
  assert.equal(signedIn.statusCode, 200)
  await signedIn.body.dump()
  // Another address has a budget of its own; probes and the IdP's back-channel logout are never limited.
  assert.deepEqual(await statuses(gw.url, 1, { 'x-forwarded-for': '198.51.100.8' }), [401])
  const probe = await request(`${gw.url}/healthz`, { headers: from })
  assert.equal(probe.statusCode, 200)
  await probe.body.dump()
  const logout = await request(`${gw.url}/auth/backchannel-logout`, {
    method: 'POST',
    headers: { ...from, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'logout_token=x',
  })
  assert.equal(logout.statusCode, 404, 'answered by its route (no IdP here), not limited')
  await logout.body.dump()

  assert.equal(await limitedCount(gw.url), 11)
  // Counted, not audited: the 20 refusals before the limit are the address's only records.
  const root = `Bearer ${await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })}`
  const res = await request(`${gw.url}/admin/audit?limit=1000`, { headers: { authorization: root } })
  const records = ((await res.body.json()) as { records: AuditRecord[] }).records
  const mine = records.filter((r) => r.clientIp === ATTACKER)
  assert.deepEqual(
    mine.map((r) => `${r.route} ${r.status}`),
    ['auth/backchannel-logout 404', 'messages 200', ...Array(20).fill('messages 401')],
    'the 20 refused messages, the signed-in one and the logout: no 429',
  )
  // One log line for the whole burst (at most one per 10 s), not one per request.
  const lines = logs.map((l) => JSON.parse(l) as { msg?: string; level?: number; address?: string })
  const sampled = lines.filter((l) => l.msg === 'requests without a credential limited per address')
  assert.equal(sampled.length, 1)
  assert.deepEqual([sampled[0]?.level, sampled[0]?.address], [40, ATTACKER])
})

test('GATEWAY_ANONYMOUS_RATE_LIMIT_MAX=0 limits nothing', async (t) => {
  const gw = await startGateway({ GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: '0' })
  t.after(() => gw.close())
  assert.deepEqual(await statuses(gw.url, 40, {}), Array(40).fill(401))
})

test('cluster: the budget is shared by every replica', async (t) => {
  const env = { ...sharedRedisEnv(t), GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: '20' }
  const a = await startGateway(env)
  t.after(() => a.close())
  const b = await startGateway(env)
  t.after(() => b.close())
  const fromA = await statuses(a.url, 12, {})
  const fromB = await statuses(b.url, 12, {})
  const all = [...fromA, ...fromB]
  assert.equal(all.filter((s) => s === 401).length, 20)
  assert.equal(all.filter((s) => s === 429).length, 4)
  assert.deepEqual(fromB.slice(-4), [429, 429, 429, 429])
})
