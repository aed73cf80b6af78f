import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { RoamingViewer, request, TEST_ENCRYPTION_KEY, TOKEN } from './cluster-harness.ts'
import {
  deletePrefix,
  freePort,
  REDIS_TEST_URL,
  startRedisServer,
  uniquePrefix,
  until,
} from './redis-harness.ts'

/** The cluster plugin inside one process: decorations, readiness, metrics, shutdown, the presence route. */

/** A gateway in this process, closed when the test ends. */
async function gateway(t: import('node:test').TestContext, env: Record<string, string>) {
  const gw = await startGateway(env)
  t.after(() => gw.close())
  return gw
}

function clusterEnv(prefix: string, url = REDIS_TEST_URL): Record<string, string> {
  return {
    REDIS_URL: url,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_REDIS_PREFIX: prefix,
    GATEWAY_STREAM_LINGER_MS: '0',
    GATEWAY_PRESENCE_TTL_MS: '1500',
    // A viewer that left is noticed at the next write to its socket.
    GATEWAY_PING_INTERVAL_MS: '300',
  }
}

test('embedded mode: no Redis, no redis readiness check, presence counted in memory', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  assert.equal(gw.app.redis, null)
  assert.equal(gw.app.cluster, null)
  const ready = JSON.parse((await request(`${gw.url}/readyz`)).body) as { checks: Record<string, string> }
  assert.equal(ready.checks.redis, undefined)
  assert.deepEqual(await gw.app.presence.of('k'), { kasmId: 'k', viewers: 0, operators: [] })
})

test('cluster mode: ready with Redis, metrics per connection, everything closed and released on close', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const app: FastifyInstance = await buildApp(loadConfig(testEnv(clusterEnv(prefix))))
  await app.ready()
  const cluster = app.cluster
  assert.ok(cluster && app.redis === cluster.redis)
  const ready = await app.inject('/readyz')
  assert.equal(ready.statusCode, 200, ready.body)
  assert.equal(JSON.parse(ready.body).checks.redis, 'ok')
  const metrics = (await app.inject('/metrics')).body
  for (const role of ['command', 'live', 'subscriber']) {
    assert.match(metrics, new RegExp(`krg_redis_connected\\{connection="${role}"\\} 1`))
  }
  const fence = await cluster.lease.acquire('held')
  assert.ok(fence !== null)
  assert.equal(await cluster.redis.exists(cluster.keys.lease('held')), 1)
  const observer = await startGateway(clusterEnv(prefix))
  t.after(() => observer.close())
  await app.close()
  assert.equal(await observer.app.redis?.exists(cluster.keys.lease('held')), 0, 'lease released on close')
  assert.equal(cluster.redis.status, 'end')
  assert.equal(cluster.subscriber.status, 'end')
})

test('Redis unreachable at boot: the replica starts not ready and becomes ready when Redis comes', async (t) => {
  const port = await freePort()
  const prefix = uniquePrefix()
  const gw = await gateway(t, clusterEnv(prefix, `redis://127.0.0.1:${port}`))
  const down = await request(`${gw.url}/readyz`)
  assert.equal(down.status, 503)
  assert.match(JSON.parse(down.body).checks.redis, /redis \w+ connection/)
  // The registry cannot be read: a request that needs it is refused with 503, not hung or crashed.
  const admin = await bearer({ roles: ['admin'] })
  const listed = await request(`${gw.url}/admin/sessions`, { headers: { authorization: `Bearer ${admin}` } })
  assert.equal(listed.status, 503)
  const redis = await startRedisServer(port)
  t.after(() => redis.stop())
  await until('ready once Redis is there', async () => (await request(`${gw.url}/readyz`)).status === 200)
})

test('presence route: viewers of two replicas, per operator; admin only; unknown session 404', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const runtime = await startSimulatedRuntime({ messagingToken: TOKEN })
  t.after(() => runtime.close())
  const a = await gateway(t, clusterEnv(prefix))
  const b = await gateway(t, clusterEnv(prefix))
  await a.app.sessions.put({
    kasmId: 'k',
    upstream: runtime.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  await until('b knows k', async () => (await b.app.sessions.get('k')) !== undefined)

  const bob = await bearer({ sub: 'bob', name: 'Bob', roles: ['viewer'], teams: ['blue'] })
  const carol = await bearer({ sub: 'carol', roles: ['viewer'], teams: ['blue'] })
  const viewers = [
    new RoamingViewer('k', bob, () => [a.url], 0),
    new RoamingViewer('k', bob, () => [b.url], 0),
    new RoamingViewer('k', carol, () => [b.url], 0),
  ]
  t.after(() => {
    for (const v of viewers) v.close()
  })
  for (const v of viewers) v.start()
  await until('streaming', () => viewers.every((v) => v.ids.length > 0))

  const admin = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const expected = {
    kasmId: 'k',
    viewers: 3,
    operators: [
      { sub: 'bob', viewers: 2, name: 'Bob' },
      { sub: 'carol', viewers: 1 },
    ],
  }
  let last = ''
  await until('both replicas counted', async () => {
    const res = await request(`${a.url}/admin/sessions/k/presence`, {
      headers: { authorization: `Bearer ${admin}` },
    })
    last = res.body
    return res.status === 200 && JSON.stringify(JSON.parse(res.body)) === JSON.stringify(expected)
  }).catch(() => assert.fail(`presence: ${last}`))

  const operator = await bearer({ roles: ['operator'] })
  const refused = await request(`${a.url}/admin/sessions/k/presence`, {
    headers: { authorization: `Bearer ${operator}` },
  })
  assert.equal(refused.status, 403)
  const foreign = await bearer({ roles: ['admin'], teams: ['red'] })
  const hidden = await request(`${a.url}/admin/sessions/k/presence`, {
    headers: { authorization: `Bearer ${foreign}` },
  })
  assert.equal(hidden.status, 404, 'a foreign session looks unknown')
  const unknown = await request(`${a.url}/admin/sessions/nope/presence`, {
    headers: { authorization: `Bearer ${admin}` },
  })
  assert.equal(unknown.status, 404)

  // A viewer leaves: the view follows (at once locally, within a refresh for the other replica).
  viewers[1]?.close()
  await until('b republished', async () => (await a.app.presence.of('k')).viewers === 2).catch(async () =>
    assert.fail(
      `b local viewers ${b.app.events.streams.viewers('k').length}, view ${JSON.stringify(await a.app.presence.of('k'))}`,
    ),
  )
})
