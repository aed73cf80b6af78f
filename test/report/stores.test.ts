import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { RedisReportStore } from '../../src/cluster/report-store.ts'
import { MemoryReportStore } from '../../src/report/memory-store.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix } from '../cluster/redis-harness.ts'
import { DAY, reportStoreContract } from './report-store-contract.ts'

test('memory: the report store contract', async () => {
  await reportStoreContract(new MemoryReportStore(2 * DAY))
})

test('Redis: the report store contract, one claim key per record and a sorted set per team', async (t) => {
  const prefix = uniquePrefix()
  const redis = new Redis(REDIS_TEST_URL)
  t.after(async () => {
    await deletePrefix(REDIS_TEST_URL, prefix)
    redis.disconnect()
  })
  const keys = clusterKeys(prefix)
  await reportStoreContract(new RedisReportStore(redis, keys, 2 * DAY))
  assert.equal(await redis.zcard(keys.report('blue')), 5)
  const ttl = await redis.pttl(keys.report('blue'))
  assert.ok(ttl > DAY && ttl <= 2 * DAY, `the set expires with the retention (${ttl} ms)`)
})
