import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { test } from 'node:test'
import { bearer } from '../helpers/jwt.ts'
import { contiguity, emitSteadily, RoamingViewer, request, startCluster } from './cluster-harness.ts'
import { until } from './redis-harness.ts'

/**
 * Redis dies mid-stream (SIGKILL, no persistence: it comes back empty) and stays away longer than the lease.
 * No replica crashes, /readyz says not ready meanwhile, writes whose auth needs no Redis still reach the
 * runtime, and once Redis is back every viewer catches up without a gap or a duplicate.
 */
test('a Redis restart mid-stream: replicas survive, readiness follows, viewers catch up', async (t) => {
  const c = await startCluster(t, 2)
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
  await until('viewers streaming', () => viewers.every((v) => v.ids.length > 0), 15_000)

  const emitting = emitSteadily(c.runtime, 300, 20, 1)
  await new Promise((r) => setTimeout(r, 500))
  await c.redis.stop()
  const downAt = Date.now()

  for (const r of c.replicas) {
    await until(`replica ${r.index} not ready`, async () => (await request(`${r.url}/readyz`)).status === 503)
  }
  // A write with a bearer needs nothing from Redis: it reaches the runtime.
  const key = `during-outage-${Date.now()}`
  const sent = await request(`${c.replicas[1]?.url}/desktop/k/mcp/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json' },
    body: JSON.stringify({ run: c.runtime.run, key, text: 'hello during the outage' }),
  })
  assert.equal(sent.status, 202, sent.body)
  assert.ok(c.runtime.received.some((r) => r.method === 'POST' && r.url.startsWith('/messages')))
  // A cookie cannot be checked without Redis: refused fast with 503, not hung.
  const started = Date.now()
  const refused = await request(`${c.replicas[0]?.url}/desktop/k/mcp/messages`, {
    method: 'POST',
    headers: { cookie, origin: 'http://gateway.test', 'content-type': 'application/json' },
    body: JSON.stringify({ run: c.runtime.run, key: `${key}-2`, text: 'x' }),
  })
  assert.equal(refused.status, 503)
  assert.equal(JSON.parse(refused.body).error, 'store_unavailable')
  assert.ok(Date.now() - started < 3000, 'failed fast')

  // Longer than the lease (2 s): every lease expires while Redis is away.
  await new Promise((r) => setTimeout(r, Math.max(0, 5000 - (Date.now() - downAt))))
  await c.redis.start()
  for (const r of c.replicas) {
    await until(
      `replica ${r.index} ready again`,
      async () => (await request(`${r.url}/readyz`)).status === 200,
    )
  }
  const last = await emitting
  await until('every viewer caught up', () => viewers.every((v) => v.seqs().at(-1) === last), 20_000)
  for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
  for (const r of c.replicas) assert.ok(r.alive(), `replica ${r.index} did not crash\n${c.logs()}`)
  // The registry survived the empty restart (restored from the replicas' memory).
  const again = await request(`${c.replicas[1]?.url}/admin/sessions/k`, {
    headers: { authorization: `Bearer ${c.admin}` },
  })
  assert.equal(again.status, 200)
  await until('one upstream stream', () => c.runtime.openEventStreams === 1)
  if (process.env.CLUSTER_TEST_LOGS) writeFileSync(process.env.CLUSTER_TEST_LOGS, c.logs())
  t.diagnostic(`viewer reconnects: ${viewers.map((v) => v.reconnects).join(',')}; events ${last}`)
})
