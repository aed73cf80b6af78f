import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { Report } from '../../src/report/stats.ts'
import { leaseHolders, type Replica, request, startCluster, TOKEN } from '../cluster/cluster-harness.ts'
import { until } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { playSequence, reportCounts, SEQUENCE_COUNTS, SESSION_TOKEN, write, writer } from './helpers.ts'

/**
 * Two real replicas on a real Redis, every session read and summarised on both (GATEWAY_STREAM_EAGER): the
 * scripted sequence is counted once over the two, its writes spread over both; then the replica reading the
 * session is killed and started again: the survivor takes over and counts nothing twice, the new process
 * counts none of the history it replays from Redis, and what happens after is counted once.
 */
test('two replicas: the sequence counted once; a killed and restarted reader counts no history', async (t) => {
  const c = await startCluster(t, 2, { GATEWAY_STREAM_EAGER: 'true' })
  const runtime = await startSimulatedRuntime({
    messagingToken: TOKEN,
    sessionToken: SESSION_TOKEN,
    deliveryStepMs: 10,
  })
  t.after(() => runtime.close())
  const put = await request(`${c.replicas[0]?.url}/admin/sessions/k1`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${c.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: TOKEN }),
  })
  assert.equal(put.status, 201, put.body)
  await until('one replica reads k1', async () => (await leaseHolders(c.replicas)).length === 1)
  await until('the upstream stream is open', () => runtime.openEventStreams === 1)

  const alive = () => c.replicas.filter((r) => r.alive())
  const urls = () => alive().map((r) => r.url)
  let turn = 0
  const next = () => (alive()[turn++ % alive().length] as Replica).url
  const dan = await bearer(
    { sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] },
    { expiresIn: '1h' },
  )
  const person = await writer(c.replicas[0]?.url as string, dan)
  await playSequence(runtime, 'k1', next, person)
  const counted = await until('the sequence counted over both replicas', async () => {
    const now = await reportCounts(urls(), 'blue')
    return now.handoffWaits === 2 && now.opened === 5 && now.closed.reply === 2 ? now : null
  })
  assert.deepEqual(counted, SEQUENCE_COUNTS, c.logs())
  // Every replica that folds the session also tries, after a grace, whatever the reader wrote: a no-op.
  const [holder] = await leaseHolders(c.replicas)
  const owner = c.replicas.find((r) => r.index === holder) as Replica
  const other = c.replicas.find((r) => r.index !== holder) as Replica
  const graced = Date.now() + 3 * 2000 + 1000
  await until('past the grace', () => Date.now() > graced)
  assert.deepEqual(await reportCounts(urls(), 'blue'), SEQUENCE_COUNTS, 'still once after the grace')
  const recordsOf = async (url: string) => {
    const res = await request(`${url}/api/report?window=24h`, { headers: { authorization: `Bearer ${dan}` } })
    assert.equal(res.status, 200, res.body)
    const report = JSON.parse(res.body) as Report
    return report.all.questions.questions + report.all.handoffs.handoffs
  }
  assert.equal(await recordsOf(other.url), 7, 'seven records, the same on every replica')
  assert.equal(await recordsOf(owner.url), 7)

  // The reader dies; the survivor takes the lease over; a new process starts in its place.
  const survivorBefore = await reportCounts([other.url], 'blue')
  owner.child.kill('SIGKILL')
  await owner.exited
  await until('the survivor reads', async () => (await leaseHolders(c.replicas)).includes(other.index))
  const restarted = await c.startReplica(2)
  // Its summary of k1 has folded the history it replayed from Redis (the handoff that ran out).
  await until(
    'the restarted replica folded the history',
    async () =>
      (await recordsOf(restarted.url)) === 7 && (await reportCounts([restarted.url], 'blue')).opened === 0,
  )
  const graceAfter = Date.now() + 3 * 2000 + 1000
  await until('past the grace again', () => Date.now() > graceAfter)
  const fresh = await reportCounts([restarted.url], 'blue')
  assert.equal(fresh.opened, 0, `no history counted:\n${c.logs()}`)
  assert.deepEqual(Object.values(fresh.closed), [0, 0, 0, 0, 0])
  assert.deepEqual(Object.values(fresh.handoffs), [0, 0, 0])
  assert.deepEqual(
    await reportCounts([other.url], 'blue'),
    survivorBefore,
    'the takeover counted nothing twice',
  )

  // What happens now is counted once, by whichever of the two.
  const q = runtime.ask({ title: 'After the restart', fields: [{ id: 'x', type: 'string' }], deadlineS: 120 })
  await write(
    restarted.url,
    'k1',
    'messages',
    { authorization: `Bearer ${dan}` },
    {
      run: runtime.run,
      key: 'after',
      reply_to: q.request_id,
      revision: q.revision,
      values: { x: 'y' },
    },
  )
  await until('the new answer counted', async () => {
    const both = await reportCounts(urls(), 'blue')
    return both.closed.reply === (survivorBefore.closed.reply ?? 0) + 1
  })
  const both = await reportCounts(urls(), 'blue')
  assert.equal(both.opened, survivorBefore.opened + 1)
  assert.equal(await recordsOf(restarted.url), 8)
})
