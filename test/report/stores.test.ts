import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { RedisReportStore } from '../../src/cluster/report-store.ts'
import { MemoryReportStore } from '../../src/report/memory-store.ts'
import type { QuestionRecord, ReportStore } from '../../src/report/types.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix } from '../cluster/redis-harness.ts'

/** Both report stores keep the same contract: once per id, per team, in closing order, for the retention. */

const DAY = 24 * 3600 * 1000

function record(id: string, team: string, closedAgoMs: number): QuestionRecord {
  const closedAt = new Date(Date.now() - closedAgoMs).toISOString()
  return {
    kind: 'question',
    id,
    team,
    kasmId: 'k1',
    run: 'r1',
    requestId: id,
    title: id,
    openedAt: closedAt,
    closedAt,
    deadline: null,
    closedBy: 'timeout',
    sub: null,
    name: null,
    via: null,
  }
}

async function contract(store: ReportStore): Promise<void> {
  assert.equal(await store.add(record('b', 'blue', 2000)), true)
  assert.equal(await store.add(record('a', 'blue', 5000)), true)
  assert.equal(await store.add(record('r', 'red', 1000)), true)
  assert.equal(await store.add(record('a', 'blue', 5000)), false, 'the same id is written once')
  assert.equal(await store.add({ ...record('a', 'blue', 1), title: 'changed' }), false)
  assert.deepEqual(
    (await store.list(['blue'], 0)).map((r) => r.id),
    ['a', 'b'],
    'oldest first',
  )
  assert.deepEqual(
    (await store.list(null, 0)).map((r) => r.id),
    ['a', 'b', 'r'],
  )
  assert.deepEqual(
    (await store.list(['blue'], Date.now() - 3000)).map((r) => r.id),
    ['b'],
  )
  assert.deepEqual(
    (await store.list(['green'], 0)).map((r) => r.id),
    [],
  )
  assert.deepEqual((await store.teams()).sort(), ['blue', 'red'])
  assert.equal(await store.claim('blue', 'opened-1'), true)
  assert.equal(await store.claim('blue', 'opened-1'), false)
  assert.equal(await store.claim('red', 'opened-1'), true, 'claims are per team')
  // Past the retention (2 days here): dropped when the next record of the team is written.
  await store.add(record('old', 'blue', 3 * DAY))
  await store.add(record('c', 'blue', 10))
  assert.deepEqual(
    (await store.list(['blue'], 0)).map((r) => r.id),
    ['a', 'b', 'c'],
  )
}

test('memory: the report store contract', async () => {
  await contract(new MemoryReportStore(2 * DAY))
})

test('Redis: the report store contract, one claim key per record and a sorted set per team', async (t) => {
  const prefix = uniquePrefix()
  const redis = new Redis(REDIS_TEST_URL)
  t.after(async () => {
    await deletePrefix(REDIS_TEST_URL, prefix)
    redis.disconnect()
  })
  const keys = clusterKeys(prefix)
  await contract(new RedisReportStore(redis, keys, 2 * DAY))
  assert.equal(await redis.zcard(keys.report('blue')), 3)
  const ttl = await redis.pttl(keys.report('blue'))
  assert.ok(ttl > DAY && ttl <= 2 * DAY, `the set expires with the retention (${ttl} ms)`)
})
