import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { test } from 'node:test'
import { openSse } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { sampleValue } from '../helpers/prometheus.ts'
import {
  contiguity,
  emitSteadily,
  leaseHolders,
  logRecords,
  metricsOf,
  type Replica,
  RoamingViewer,
  request,
  startCluster,
} from './cluster-harness.ts'
import { until } from './redis-harness.ts'

interface Readiness {
  status: string
  ready: boolean
  degraded: string[]
  checks: Record<string, string>
}

async function readiness(r: Replica): Promise<{ code: number; body: Readiness }> {
  const res = await request(`${r.url}/readyz`)
  return { code: res.status, body: JSON.parse(res.body) as Readiness }
}

/** Reconnect attempts of all three connections, from the replica's metrics. */
async function reconnectAttempts(r: Replica): Promise<number> {
  const families = await metricsOf(r)
  let sum = 0
  for (const connection of ['command', 'live', 'subscriber'])
    sum += sampleValue(families, 'krg_redis_reconnects_total', { connection }) ?? 0
  return sum
}

/**
 * Redis dies mid-stream (SIGKILL, no persistence: it comes back empty) and stays away longer than the lease.
 * Every replica stays ready in degraded mode (an ingress keeps sending what needs no Redis), bearer reads and
 * writes reach the runtime, cookie and admin requests fail fast with 503, open viewer streams stay open, each
 * replica logs the outage once (no stack trace per retry), and once Redis is back every viewer catches up
 * without a gap or a duplicate.
 */
test('a Redis outage: replicas stay ready but degraded, bearer traffic flows, logged once, viewers catch up', async (t) => {
  // A Redis command waits a minute before it times out here: a request that waited for one instead of failing
  // fast would take that long, far from what a loaded machine adds to one that fails fast.
  const c = await startCluster(t, 2, { LOG_LEVEL: 'info', GATEWAY_REDIS_COMMAND_TIMEOUT_MS: '60000' })
  await c.addSession('k')
  const operator = await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
  const login = await request(`${c.replicas[0]?.url}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operator}` },
  })
  const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? ''
  assert.match(cookie, /^krg_session=/)

  const viewers: RoamingViewer[] = []
  t.after(() => {
    for (const v of viewers) v.close()
  })
  for (let i = 0; i < 4; i++) {
    const v = new RoamingViewer('k', operator, () => c.replicas.map((r) => r.url), i)
    viewers.push(v)
    v.start()
  }
  await until('viewers streaming', () => viewers.every((v) => v.ids.length > 0))
  const reconnectsBefore = viewers.map((v) => v.reconnects)

  const emitting = emitSteadily(c.runtime, 300, 20, 1)
  await until('events flowing', () => viewers.every((v) => v.ids.length > 5))
  const marks = c.replicas.map((r) => r.output.length)
  const attemptsBefore = await Promise.all(c.replicas.map(reconnectAttempts))
  await c.redis.stop()

  for (const r of c.replicas) {
    await until(`replica ${r.index} degraded`, async () => (await readiness(r)).body.status === 'degraded')
    const { code, body } = await readiness(r)
    assert.equal(code, 200, 'degraded is ready: the balancer keeps sending')
    assert.equal(body.ready, true)
    assert.deepEqual(body.degraded, ['redis'])
    assert.match(body.checks.redis ?? '', /^degraded: redis \w+ connection lost \(.+\) at \d{4}-/)
    assert.equal(sampleValue(await metricsOf(r), 'krg_degraded'), 1)
  }
  // Bearer reads and writes need nothing from Redis (registry from memory, rate limit skipped).
  const key = `during-outage-${Date.now()}`
  const sent = await request(`${c.replicas[1]?.url}/desktop/k/mcp/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json' },
    body: JSON.stringify({ run: c.runtime.run, key, text: 'hello during the outage' }),
  })
  assert.equal(sent.status, 202, sent.body)
  assert.ok(c.runtime.received.some((r) => r.method === 'POST' && r.url.startsWith('/messages')))
  const inbox = await request(`${c.replicas[0]?.url}/desktop/k/mcp/inbox`, {
    headers: { authorization: `Bearer ${operator}` },
  })
  assert.equal(inbox.status, 200, inbox.body)
  // A cookie cannot be checked without Redis: refused fast with 503, not hung; so is an admin write.
  const started = Date.now()
  const refused = await request(`${c.replicas[0]?.url}/desktop/k/mcp/messages`, {
    method: 'POST',
    headers: { cookie, origin: 'http://gateway.test', 'content-type': 'application/json' },
    body: JSON.stringify({ run: c.runtime.run, key: `${key}-2`, text: 'x' }),
  })
  assert.equal(refused.status, 503)
  assert.equal(JSON.parse(refused.body).error, 'store_unavailable')
  assert.ok(Date.now() - started < 30_000, 'failed fast, without waiting for a command to time out')
  const adminWrite = await request(`${c.replicas[1]?.url}/admin/sessions/k2`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${c.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: c.runtime.url, team: 'blue', messagingToken: 'x' }),
  })
  assert.equal(adminWrite.status, 503, adminWrite.body)
  // A viewer connecting now: its replay cannot be read, so it is refused before its stream opens (a client
  // tells that from a drop, and retries); it is served once Redis is back.
  const late = await openSse(`${c.replicas[0]?.url}/desktop/k/mcp/events`, {
    authorization: `Bearer ${operator}`,
  })
  assert.equal(late.status, 503)
  assert.equal((late.body as { error: string }).error, 'store_unavailable')

  // Every lease expires while Redis is away (renewals fail), and every connection retries many times over:
  // what the replicas log meanwhile is what an on-call person reads during a long outage.
  await until('no replica holds a lease', async () => (await leaseHolders(c.replicas)).length === 0)
  for (const [i, r] of c.replicas.entries()) {
    await until(
      `replica ${r.index} retried Redis`,
      async () => (await reconnectAttempts(r)) >= (attemptsBefore[i] ?? 0) + 12,
    )
  }
  assert.deepEqual(
    viewers.map((v) => v.reconnects),
    reconnectsBefore,
    'open viewer streams stay open during the outage',
  )

  await c.redis.start()
  for (const r of c.replicas) {
    await until(`replica ${r.index} ready again`, async () => (await readiness(r)).body.status === 'ready')
    assert.equal(sampleValue(await metricsOf(r), 'krg_degraded'), 0)
  }
  const last = await emitting
  await until('every viewer caught up', () => viewers.every((v) => v.seqs().at(-1) === last))
  for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
  for (const r of c.replicas) assert.ok(r.alive(), `replica ${r.index} did not crash\n${c.logs()}`)

  for (const [i, r] of c.replicas.entries()) {
    const records = logRecords(r, marks[i])
    const warnings = records.filter((l) => Number(l.level) >= 40)
    const messages = warnings.map((l) => String(l.msg))
    const unavailable = messages.filter((m) => m.startsWith('redis unavailable'))
    assert.equal(
      unavailable.length,
      1,
      `one warning for the outage, replica ${r.index}:\n${messages.join('\n')}`,
    )
    // Redis came back empty: restoring the registry is the one other state change worth a warning.
    assert.deepEqual(
      messages.filter((m) => !m.startsWith('redis unavailable')),
      messages.includes('redis had lost the session registry; restored it from memory')
        ? ['redis had lost the session registry; restored it from memory']
        : [],
      `replica ${r.index} warned only of state changes:\n${warnings.map((l) => JSON.stringify(l)).join('\n')}`,
    )
    const outage = warnings.find((l) => String(l.msg).startsWith('redis unavailable'))
    assert.ok(outage?.connection && outage.reason, 'the warning names the connection and the reason')
    assert.ok(!warnings.some((l) => JSON.stringify(l).includes('"stack"')), 'no stack trace in a warning')
    const back = records.filter((l) => l.msg === 'redis available again')
    assert.equal(back.length, 1, `replica ${r.index} logged the return once`)
    assert.ok(Number(back[0]?.downMs) > 0)
  }
  // The registry survived the empty restart (restored from the replicas' memory).
  const again = await request(`${c.replicas[1]?.url}/admin/sessions/k`, {
    headers: { authorization: `Bearer ${c.admin}` },
  })
  assert.equal(again.status, 200)
  await until('one upstream stream', () => c.runtime.openEventStreams === 1)
  if (process.env.CLUSTER_TEST_LOGS) writeFileSync(process.env.CLUSTER_TEST_LOGS, c.logs())
  t.diagnostic(`viewer reconnects: ${viewers.map((v) => v.reconnects).join(',')}; events ${last}`)
})
