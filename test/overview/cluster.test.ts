import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type Cluster, leaseHolders, replyTo, request, startCluster } from '../cluster/cluster-harness.ts'
import { until } from '../cluster/redis-harness.ts'
import { openSse } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { openOverview } from './helpers.ts'

/**
 * Two real replicas on one Redis: each folds the session from the Redis stream it reads anyway, the one
 * upstream reader's health, the "I'm on it" marks, presence and who answered are shared, and a replica's
 * death changes nothing for the overviews of the other.
 */
describe('the overview on two replicas', () => {
  let c: Cluster
  const cleanups: (() => unknown)[] = []
  const t = { after: (fn: () => unknown) => void cleanups.push(fn) }
  before(async () => {
    c = await startCluster(t, 2, { GATEWAY_PRESENCE_TTL_MS: '1500', GATEWAY_STREAM_AUTH_RECHECK_MS: '60000' })
    await c.addSession('k1')
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })

  test('one upstream reader; both overviews get the summary, its health, the marks, presence and who answered', async () => {
    const carol = await bearer(
      { sub: 'carol', name: 'Carol', roles: ['operator'], teams: ['blue'] },
      { expiresIn: '1h' },
    )
    const dan = await bearer(
      { sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] },
      { expiresIn: '1h' },
    )
    const [r0, r1] = c.replicas as [Cluster['replicas'][0], Cluster['replicas'][0]]
    const a = await openOverview(t, r0, carol)
    const b = await openOverview(t, r1, dan)
    for (const o of [a, b]) await o.until('live on both replicas', (m) => m.get('k1')?.health === 'live')
    assert.equal(c.runtime.openEventStreams, 1, 'one upstream stream for both replicas')

    const q = c.runtime.ask({ title: 'Which export?', fields: [{ id: 'x', type: 'string', required: true }] })
    for (const o of [a, b])
      await o.until('the question', (m) => m.get('k1')?.summary?.openRequests.length === 1)

    const claim = await request(
      `${r0.url}/api/sessions/k1/requests/${q.request_id}/claim?run=${encodeURIComponent(c.runtime.run)}`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${carol}` },
      },
    )
    assert.equal(claim.status, 200)
    await b.until(
      "Carol's mark on the other replica",
      (m) => m.get('k1')?.claims[q.request_id]?.name === 'Carol',
    )
    const taken = await request(
      `${r1.url}/api/sessions/k1/requests/${q.request_id}/claim?run=${encodeURIComponent(c.runtime.run)}`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${dan}` },
      },
    )
    assert.equal(taken.status, 409, 'one holder across replicas')

    const watcher = await openSse(`${r0.url}/desktop/k1/mcp/events`, { authorization: `Bearer ${carol}` })
    cleanups.push(() => watcher.close())
    await b.until(
      'Carol watching, seen from the other replica',
      (m) => m.get('k1')?.watchers.includes('Carol') === true,
    )

    const reply = await replyTo(r1, dan, 'k1', {
      run: c.runtime.run,
      requestId: q.request_id,
      key: 'd1',
      values: { x: 'csv' },
    })
    assert.equal(reply.status, 202)
    for (const o of [a, b]) {
      await o.until('closed, mark gone', (m) => {
        const e = m.get('k1')
        return e?.summary?.openRequests.length === 0 && Object.keys(e.claims).length === 0
      })
    }
    await until('the answer in the shared audit log', async () => {
      const who = await request(
        `${r0.url}/api/sessions/k1/requests/${q.request_id}/answer?run=${encodeURIComponent(c.runtime.run)}`,
        {
          headers: { authorization: `Bearer ${carol}` },
        },
      )
      return who.status === 200 && (JSON.parse(who.body) as { name: string }).name === 'Dan'
    })
    watcher.close()

    // The replica reading the session dies: the other takes the lease; its overview carries on.
    const [held] = await leaseHolders(c.replicas)
    const holder = c.replicas.find((r) => r.index === held)
    assert.ok(holder, 'one replica holds the lease')
    const survivor = holder === r0 ? b : a
    holder.child.kill('SIGKILL')
    await until(
      'the other replica reads',
      () => c.runtime.eventConnections >= 2 && c.runtime.openEventStreams === 1,
    )
    c.runtime.emit('status', { phase: 'done', verdict: 'pass', outcome: 'passed' })
    c.runtime.closeTrace({ done: true })
    await survivor.until('the verdict after the failover', (m) => m.get('k1')?.summary?.verdict === 'pass')
    assert.equal(survivor.entries().get('k1')?.health, 'live')
  })
})
