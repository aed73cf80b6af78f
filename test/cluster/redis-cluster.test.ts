import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { request, TEST_ENCRYPTION_KEY, TOKEN } from './cluster-harness.ts'
import { type RedisCluster, startRedisCluster } from './redis-cluster-harness.ts'
import { uniquePrefix, until } from './redis-harness.ts'

/**
 * Cluster mode on a real Redis Cluster (3 masters, 3 replicas, every node with a password), through
 * GATEWAY_REDIS_CLUSTER_NODES and REDIS_URL's credentials. One cluster for the whole file; each test has its
 * own key prefix.
 */

const PASSWORD = 'cluster-test-password'
let cluster: RedisCluster

before(async () => {
  cluster = await startRedisCluster({ password: PASSWORD })
})
after(() => cluster?.stop())

/** The environment of a gateway on the test's cluster, under `prefix`. */
function clusterEnv(prefix: string): Record<string, string> {
  return {
    GATEWAY_REDIS_CLUSTER_NODES: cluster.nodes,
    REDIS_URL: `redis://:${PASSWORD}@ignored`,
    GATEWAY_REDIS_PREFIX: prefix,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_STREAM_LINGER_MS: '0',
  }
}

async function gateway(
  t: import('node:test').TestContext,
  env: Record<string, string>,
): Promise<TestGateway> {
  const gw = await startGateway(env)
  t.after(() => gw.close())
  return gw
}

test('boots on the Redis Cluster, ready; its keys are hash-tagged', async (t) => {
  const gw = await gateway(t, clusterEnv(uniquePrefix()))
  await until('ready', async () => (await request(`${gw.url}/readyz`)).status === 200, 10_000)
  const ready = JSON.parse((await request(`${gw.url}/readyz`)).body) as { checks: Record<string, string> }
  assert.equal(ready.checks.redis, 'ok')
  assert.equal(gw.app.cluster?.keys.hashTagged, true)
  assert.equal(gw.app.redis?.isCluster, true)
})

test('session registry: a PUT on one gateway is seen by the other, a DELETE too', async (t) => {
  const prefix = uniquePrefix()
  const a = await gateway(t, clusterEnv(prefix))
  const b = await gateway(t, clusterEnv(prefix))
  const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
  const put = await request(`${a.url}/admin/sessions/k1`, {
    method: 'PUT',
    headers: { authorization: admin, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: 'http://127.0.0.1:9', team: 'blue', messagingToken: TOKEN }),
  })
  assert.ok(put.status === 201 || put.status === 200, put.body)
  await until('b sees k1', async () => {
    const got = await request(`${b.url}/admin/sessions/k1`, { headers: { authorization: admin } })
    return got.status === 200
  })
  const del = await request(`${b.url}/admin/sessions/k1`, {
    method: 'DELETE',
    headers: { authorization: admin },
  })
  assert.ok(del.status === 204 || del.status === 200, del.body)
  await until('a forgot k1', async () => {
    const got = await request(`${a.url}/admin/sessions/k1`, { headers: { authorization: admin } })
    return got.status === 404
  })
})

test('config: a Redis Cluster refuses Sentinel beside it, a database other than 0, a malformed node', () => {
  const base = { GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }
  const refused = (env: Record<string, string>, pattern: RegExp) =>
    assert.throws(
      () => loadConfig(testEnv({ ...base, ...env })),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError)
        assert.match(err.message, pattern)
        return true
      },
    )
  refused(
    { GATEWAY_REDIS_CLUSTER_NODES: 'a:6379', GATEWAY_REDIS_SENTINELS: 's:26379' },
    /GATEWAY_REDIS_CLUSTER_NODES and GATEWAY_REDIS_SENTINELS/,
  )
  refused(
    { GATEWAY_REDIS_CLUSTER_NODES: 'a:6379', REDIS_URL: 'redis://:pw@x/3' },
    /REDIS_URL: database 3 with GATEWAY_REDIS_CLUSTER_NODES/,
  )
  refused({ GATEWAY_REDIS_CLUSTER_NODES: 'a:6379,b' }, /GATEWAY_REDIS_CLUSTER_NODES/)
})
