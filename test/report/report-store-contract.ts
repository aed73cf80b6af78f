import assert from 'node:assert/strict'
import type { OpenedRecord, QuestionRecord, ReportStore } from '../../src/report/types.ts'

/**
 * Every report store keeps the same contract: once per id, per team, in closing order, for the retention. Run
 * by stores.test.ts on memory and Redis, and by test/cluster/redis-cluster.test.ts on a Redis Cluster.
 */

export const DAY = 24 * 3600 * 1000

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

/** Checks the contract on an empty store whose retention is 2 days. */
export async function reportStoreContract(store: ReportStore): Promise<void> {
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
  assert.equal(await store.add(record('r', 'blue', 1000)), true, 'ids are per team')
  // A question as it opened is filed under its opening.
  const opened: OpenedRecord = {
    kind: 'opened',
    id: 'o',
    team: 'blue',
    kasmId: 'k1',
    run: 'r1',
    requestId: 'o',
    title: 'o',
    openedAt: new Date(Date.now() - 1500).toISOString(),
    deadline: null,
  }
  assert.equal(await store.add(opened), true)
  assert.equal(await store.add(opened), false)
  assert.deepEqual(
    (await store.list(['blue'], Date.now() - 1800)).map((r) => r.id),
    ['o', 'r'],
  )
  // Past the retention (2 days here): dropped when the next record of the team is written.
  await store.add(record('old', 'blue', 3 * DAY))
  await store.add(record('c', 'blue', 10))
  assert.deepEqual(
    (await store.list(['blue'], 0)).map((r) => r.id),
    ['a', 'b', 'o', 'r', 'c'],
  )
}
