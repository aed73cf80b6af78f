import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { type TestContext, test } from 'node:test'
import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { buildApp } from '../../src/app.ts'
import { authPlugin } from '../../src/auth/plugin.ts'
import { MemoryRateLimitStore, type RateLimitCount } from '../../src/auth/rate-limit-store.ts'
import { loadConfig } from '../../src/config.ts'
import { metricsPlugin } from '../../src/metrics/plugin.ts'
import { storesPlugin } from '../../src/stores/plugin.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { auth, call, startAuthGateway } from './harness.ts'

test('the rate limit is per operator: one is limited (429, Retry-After), the other is not', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_RATE_LIMIT_MAX: '3', GATEWAY_RATE_LIMIT_WINDOW_MS: '60000' })
  const alice = auth(await bearer({ sub: 'alice' }))
  const bob = auth(await bearer({ sub: 'bob' }))
  for (let i = 0; i < 3; i++) {
    const ok = await call(`${gw.url}/t/read`, { headers: alice })
    assert.equal(ok.status, 200, `alice ${i}`)
    for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'])
      assert.equal(ok.headers[name], undefined, `no ${name} within the budget`)
  }
  const limited = await call(`${gw.url}/t/write`, { method: 'POST', headers: alice })
  assert.equal(limited.status, 429)
  assert.equal(limited.body.error, 'rate_limited')
  assert.match(String(limited.body.message), /retry after \d+ seconds/)
  const retryAfter = Number(limited.headers['retry-after'])
  assert.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After ${limited.headers['retry-after']}`)
  assert.equal(limited.headers['x-ratelimit-limit'], '3')
  assert.equal(limited.headers['x-ratelimit-remaining'], '0')
  assert.equal(gw.reached.get('write') ?? 0, 0, 'the limited write never reached the route')

  // Same client address, another operator: its own budget.
  for (let i = 0; i < 3; i++) {
    assert.equal((await call(`${gw.url}/t/read`, { headers: bob })).status, 200, `bob ${i}`)
  }
  assert.equal((await call(`${gw.url}/t/read`, { headers: bob })).status, 429)
})

test('unauthenticated routes are limited per client address; probes and metrics never are', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_RATE_LIMIT_MAX: '2' })
  const statuses: number[] = []
  for (let i = 0; i < 3; i++)
    statuses.push((await call(`${gw.url}/auth/login?ticket=${'x'.repeat(43)}`)).status)
  assert.deepEqual(statuses, [401, 401, 429])
  // An operator is counted by sub, not by the address that is already limited.
  assert.equal(
    (await call(`${gw.url}/t/read`, { headers: auth(await bearer({ sub: 'carol' })) })).status,
    200,
  )
  for (let i = 0; i < 5; i++) {
    assert.equal((await call(`${gw.url}/healthz`)).status, 200)
    assert.equal((await call(`${gw.url}/metrics`)).status, 200)
  }
})

test('a route can set its own budget or opt out with config.rateLimit', async (t) => {
  const app = await buildApp(loadConfig(testEnv({ GATEWAY_RATE_LIMIT_MAX: '2' })))
  t.after(() => app.close())
  app.get('/t/free', { onRequest: app.requireAccess('read'), config: { rateLimit: false } }, async () => 'ok')
  app.get(
    '/t/tight',
    { onRequest: app.requireAccess('read'), config: { rateLimit: { max: 1, timeWindow: 60_000 } } },
    async () => 'ok',
  )
  await app.ready()
  const headers = auth(await bearer({ sub: 'dave' }))
  for (let i = 0; i < 4; i++) {
    assert.equal((await app.inject({ url: '/t/free', headers })).statusCode, 200)
  }
  assert.equal((await app.inject({ url: '/t/tight', headers })).statusCode, 200)
  assert.equal((await app.inject({ url: '/t/tight', headers })).statusCode, 429)
})

/**
 * A replica for the Redis tests: the real metrics and auth plugins with `app.redis` decorated the way
 * src/cluster/plugin.ts does, and one read route; closed with `t.after`.
 */
async function redisReplica(
  t: TestContext,
  redis: Redis,
  prefix: string,
  max: number,
): Promise<FastifyInstance> {
  const config = loadConfig(testEnv({ GATEWAY_RATE_LIMIT_MAX: String(max), GATEWAY_REDIS_PREFIX: prefix }))
  const app = Fastify({ logger: false })
  app.decorate('config', config)
  app.decorate('redis', redis)
  await app.register(metricsPlugin)
  await app.register(storesPlugin)
  await app.register(authPlugin)
  app.get('/t/read', { onRequest: app.requireAccess('read') }, async () => 'ok')
  await app.ready()
  t.after(() => app.close())
  return app
}

/**
 * A connection to the test Redis (REDIS_TEST_URL) with a key prefix of its own (removed with `t.after`), and
 * `roundTrips()`: from the call on, how many commands on rate-limit keys the replicas sent on it (each a round
 * trip; not those scripts ran). Counted as they are sent, not with MONITOR: a MONITOR connection of ioredis
 * can fail on its first line while other test files keep the shared Redis busy.
 */
async function monitoredRedis(t: TestContext) {
  const redis = new Redis(process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 })
  const prefix = `krg-test-${randomBytes(6).toString('hex')}:`
  t.after(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    await redis.quit()
  })
  const counters: { count: number }[] = []
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = ((command, stream) => {
    if (command.args.some((arg) => String(arg).startsWith(`${prefix}rl:`)))
      for (const counter of counters) counter.count++
    return send(command, stream)
  }) as typeof redis.sendCommand
  const roundTrips = () => {
    const sent = { count: 0 }
    counters.push(sent)
    return sent
  }
  return { redis, prefix, roundTrips }
}

/**
 * Two replicas sharing a real Redis (REDIS_TEST_URL) share each operator's budget. Built from the real
 * metrics and auth plugins with `app.redis` decorated the way src/cluster/plugin.ts does.
 */
test('with app.redis the budget is shared across replicas', async (t) => {
  const { redis, prefix } = await monitoredRedis(t)
  const [a, b] = [await redisReplica(t, redis, prefix, 3), await redisReplica(t, redis, prefix, 3)]
  const alice = auth(await bearer({ sub: 'alice' }))
  const statuses: number[] = []
  for (const app of [a, b, a, b])
    statuses.push((await app.inject({ url: '/t/read', headers: alice })).statusCode)
  assert.deepEqual(statuses, [200, 200, 200, 429])
  assert.equal(
    (await b.inject({ url: '/t/read', headers: auth(await bearer({ sub: 'bob' })) })).statusCode,
    200,
  )
  assert.ok((await redis.keys(`${prefix}rl:*`)).length >= 2, 'counters live in Redis under the prefix')
})

test('with app.redis a burst of one operator shares round trips and is still counted exactly', async (t) => {
  const { redis, prefix, roundTrips } = await monitoredRedis(t)
  const app = await redisReplica(t, redis, prefix, 5)
  const alice = auth(await bearer({ sub: 'alice' }))
  // Verified once, so the burst reaches the limit together.
  assert.equal((await app.inject({ url: '/t/read', headers: alice })).statusCode, 200)
  const sent = roundTrips()
  const burst = await Promise.all(
    Array.from({ length: 20 }, () => app.inject({ url: '/t/read', headers: alice })),
  )
  const statuses = burst.map((r) => r.statusCode)
  assert.equal(statuses.filter((s) => s === 200).length, 4, `5 in all, one before the burst: ${statuses}`)
  assert.equal(statuses.filter((s) => s === 429).length, 16)
  assert.equal(await redis.get(`${prefix}rl:op:alice`), '5', 'the budget handed out, never beyond it')
  assert.ok(sent.count > 0 && sent.count < 20, `${sent.count} round trips for 20 requests`)
})

test('with app.redis a busy operator costs a lease per few requests, and replicas never admit beyond the budget', async (t) => {
  const { redis, prefix, roundTrips } = await monitoredRedis(t)
  // A budget of 500: each replica leases 1, 2, 4, … up to 10 units (a fiftieth) at a time.
  const [a, b] = [await redisReplica(t, redis, prefix, 500), await redisReplica(t, redis, prefix, 500)]
  const alice = auth(await bearer({ sub: 'alice' }))
  const sent = roundTrips()
  let admitted = 0
  for (let i = 0; i < 200; i++)
    if ((await a.inject({ url: '/t/read', headers: alice })).statusCode === 200) admitted++
  assert.equal(admitted, 200)
  assert.ok(
    sent.count > 0 && sent.count <= 30,
    `${sent.count} round trips for 200 requests one after another`,
  )
  // Both replicas at once, far past the budget: never more than 500 admitted in all, and at most what the
  // two may hold unused (10 units each) fewer.
  const burst = await Promise.all(
    Array.from({ length: 600 }, (_, i) => (i % 2 === 0 ? a : b).inject({ url: '/t/read', headers: alice })),
  )
  admitted += burst.filter((r) => r.statusCode === 200).length
  assert.ok(admitted <= 500, `${admitted} admitted of a budget of 500`)
  assert.ok(admitted >= 480, `${admitted} admitted: at most the units two replicas hold are lost`)
  assert.ok(Number(await redis.get(`${prefix}rl:op:alice`)) <= 500, 'Redis never hands out beyond the budget')
  const refused = burst.find((r) => r.statusCode === 429)
  assert.ok(refused, 'the rest refused')
  assert.ok(Number(refused.headers['retry-after']) > 0, 'with the time left in the window')
})

test('with app.redis unreachable the limit lets requests through: it protects capacity, it is not auth', async (t) => {
  // Nothing listens on port 1: every lease fails at once (no retry, no offline queue).
  const redis = new Redis('redis://127.0.0.1:1', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  t.after(() => redis.disconnect())
  const app = await redisReplica(t, redis, `krg-test-${randomBytes(6).toString('hex')}:`, 1)
  const alice = auth(await bearer({ sub: 'alice' }))
  for (let i = 0; i < 3; i++)
    assert.equal((await app.inject({ url: '/t/read', headers: alice })).statusCode, 200)
})

test('the in-memory counter: a window per key from its first request, a fresh one once it ends', (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 })
  const store = new MemoryRateLimitStore()
  const counts: Array<RateLimitCount | undefined> = []
  const count = (key: string) => store.incr(key, 60_000, 2, (err, c) => counts.push(err ? undefined : c))
  count('op:alice')
  t.mock.timers.tick(10_000)
  count('op:alice')
  count('op:bob')
  assert.deepEqual(counts, [
    { current: 1, ttl: 60_000 },
    { current: 2, ttl: 50_000 },
    { current: 1, ttl: 60_000 },
  ])
  t.mock.timers.tick(50_000)
  count('op:alice')
  assert.deepEqual(counts.at(-1), { current: 1, ttl: 60_000 }, 'the window ended: counted afresh')
})
