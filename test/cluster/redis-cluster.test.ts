import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Cluster } from 'ioredis'
import pino from 'pino'
import { ChangeFeed } from '../../src/cluster/change-feed.ts'
import { RedisCookieStore } from '../../src/cluster/cookie-store.ts'
import { RedisReportStore } from '../../src/cluster/report-store.ts'
import { ConfigError, loadConfig, type RedisEndpoint } from '../../src/config.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { cookieStoreContract, redisCookiePair } from '../auth/cookie-store-contract.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { chatLinkContract, redisChatLinkPair } from '../identity/chat-links-contract.ts'
import { DAY, reportStoreContract } from '../report/report-store-contract.ts'
import {
  contiguity,
  emitSteadily,
  RoamingViewer,
  request,
  TEST_ENCRYPTION_KEY,
  TOKEN,
} from './cluster-harness.ts'
import { type RedisCluster, startRedisCluster } from './redis-cluster-harness.ts'
import { type StoreRedis, storeConnection, storeKeys, uniquePrefix, until } from './redis-harness.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('on a Redis Cluster', () => {
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

  /** The stores' connections on the cluster, as the cluster plugin opens them (config read from the environment). */
  const onCluster: StoreRedis = {
    get endpoint(): RedisEndpoint {
      const redis = loadConfig(testEnv(clusterEnv(uniquePrefix()))).redis
      assert.equal(redis?.kind, 'cluster')
      return redis
    },
  }

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

  /** Registers `kasmId` (team blue) through `gw`'s admin API. */
  async function putSession(gw: TestGateway, admin: string, kasmId: string, upstream = 'http://127.0.0.1:9') {
    const put = await request(`${gw.url}/admin/sessions/${kasmId}`, {
      method: 'PUT',
      headers: { authorization: admin, 'content-type': 'application/json' },
      body: JSON.stringify({ upstream, team: 'blue', messagingToken: TOKEN }),
    })
    assert.ok(put.status === 201 || put.status === 200, put.body)
  }

  test('boots on the Redis Cluster, ready; its keys are hash-tagged', async (t) => {
    const gw = await gateway(t, clusterEnv(uniquePrefix()))
    await until('ready', async () => (await request(`${gw.url}/readyz`)).status === 200)
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
    await putSession(a, admin, 'k1')
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

  // The stores' own contracts, each store as two replicas on the cluster: cookie sessions (revoked one by one,
  // all of a person's, an IdP session's and an IdP subject's: what back-channel logout does), linked chat
  // accounts (a person's and an IdP session's end) and the report store.
  cookieStoreContract('redis cluster (two replicas)', redisCookiePair(onCluster))
  chatLinkContract('redis cluster (two replicas)', redisChatLinkPair(onCluster))

  test("report store contract on the Redis Cluster: a team's records and claims in one slot", async (t) => {
    const keys = storeKeys(t, onCluster)
    const command = await storeConnection(t, onCluster)
    await reportStoreContract(new RedisReportStore(command, keys, 2 * DAY))
    assert.equal(await command.zcard(keys.report('blue')), 5)
  })

  test('rate limit: one budget over two gateways on the cluster', async (t) => {
    const env = { ...clusterEnv(uniquePrefix()), GATEWAY_RATE_LIMIT_MAX: '6' }
    const [a, b] = [await gateway(t, env), await gateway(t, env)]
    const headers = { authorization: `Bearer ${await bearer({ sub: 'rita', roles: ['admin'] })}` }
    const statuses: number[] = []
    for (let i = 0; i < 10; i++)
      statuses.push((await request(`${(i % 2 ? b : a).url}/admin/sessions`, { headers })).status)
    const admitted = statuses.filter((s) => s === 200).length
    assert.equal(admitted, 6, `admitted ${statuses}`)
    assert.deepEqual(statuses.slice(6), [429, 429, 429, 429])
  })

  test('audit: an admin write on one gateway is listed by the other', async (t) => {
    const prefix = uniquePrefix()
    const [a, b] = [await gateway(t, clusterEnv(prefix)), await gateway(t, clusterEnv(prefix))]
    const admin = `Bearer ${await bearer({ sub: 'ada', roles: ['admin'] })}`
    await putSession(a, admin, 'audited')
    await until('b lists the write', async () => {
      const res = await request(`${b.url}/admin/audit?kasmId=audited`, { headers: { authorization: admin } })
      const { records } = JSON.parse(res.body) as { records: { sub?: string; kasmId?: string }[] }
      return records.some((r) => r.sub === 'ada' && r.kasmId === 'audited')
    })
  })

  test('stream slots: the per-operator cap holds over two gateways, a slot given back is free anywhere', async (t) => {
    const env = { ...clusterEnv(uniquePrefix()), GATEWAY_MAX_STREAMS_PER_OPERATOR: '2' }
    const [a, b] = [await gateway(t, env), await gateway(t, env)]
    const slotsOf = (gw: TestGateway) => {
      const slots = gw.app.cluster?.streamSlots
      assert.ok(slots)
      return slots
    }
    assert.equal(await slotsOf(a).take('olga'), true)
    assert.equal(await slotsOf(b).take('olga'), true)
    assert.equal(await slotsOf(a).take('olga'), false, 'the cap counts both gateways')
    assert.equal(await slotsOf(b).take('otto'), true, 'per operator')
    slotsOf(a).give('olga')
    await until('the slot given back on a is free on b', () => slotsOf(b).take('olga'))
  })

  /**
   * A session watched through two gateways on the cluster (its owner appends with SPUBLISH, each gateway's live
   * connection listens with SSUBSCRIBE on the shard of the session's slot), 4 viewers over both.
   */
  async function watchedSession(t: import('node:test').TestContext, kasmId: string) {
    const runtime = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 5000 })
    t.after(() => runtime.close())
    const env = {
      ...clusterEnv(uniquePrefix()),
      GATEWAY_LEASE_MS: '2000',
      GATEWAY_UPSTREAM_RETRY_SCALE: '0.05',
      GATEWAY_PING_INTERVAL_MS: '1000',
      GATEWAY_PRESENCE_TTL_MS: '1500',
    }
    const gateways = [await gateway(t, env), await gateway(t, env)]
    const admin = `Bearer ${await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] })}`
    await putSession(gateways[0] as TestGateway, admin, kasmId, runtime.url)
    for (const gw of gateways)
      await until('both gateways know the session', async () => {
        const got = await request(`${gw.url}/admin/sessions/${kasmId}`, { headers: { authorization: admin } })
        return got.status === 200
      })
    const operator = await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
    const viewers: RoamingViewer[] = []
    t.after(() => {
      for (const v of viewers) v.close()
    })
    for (let i = 0; i < 4; i++) {
      const v = new RoamingViewer(kasmId, operator, () => gateways.map((g) => g.url), i)
      viewers.push(v)
      v.start()
    }
    await until('viewers streaming', () => viewers.every((v) => v.ids.length > 0))
    return { runtime, viewers, gateways }
  }

  test('events: two gateways, viewers on both, every event once and in order', async (t) => {
    const { runtime, viewers, gateways } = await watchedSession(t, 'ev-order')
    const last = await emitSteadily(runtime, 150, 5, 3)
    await until('every viewer has the last event', () => viewers.every((v) => v.seqs().at(-1) === last))
    for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
    // Presence over the cluster: each gateway's hash in its own slot, the view merges both.
    const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
    for (const gw of gateways)
      await until(`${gw.url} counts the viewers of both gateways`, async () => {
        const res = await request(`${gw.url}/admin/sessions/ev-order/presence`, {
          headers: { authorization: admin },
        })
        return res.status === 200 && (JSON.parse(res.body) as { viewers: number }).viewers === 4
      })
  })

  test("events: the master of the session's slot fails over while viewers stream; nothing lost, repeated or reordered", async (t) => {
    const kasmId = 'ev-failover'
    const { runtime, viewers, gateways } = await watchedSession(t, kasmId)
    // The session's keys and live channel are all `{ev-failover}`: the master serving that slot.
    const slot = Number(
      await cluster.node(cluster.ports[0] as number).call('CLUSTER', 'KEYSLOT', `{${kasmId}}`),
    )
    const masters = await cluster.masters()
    const index = masters.findLastIndex((m) => m.firstSlot <= slot)
    const resyncs = async () => {
      let n = 0
      for (const gw of gateways) {
        const metric = await gw.app.metrics.registry.getSingleMetric('krg_cluster_live_reads_total')?.get()
        n += metric?.values.find((v) => v.labels.reason === 'resync')?.value ?? 0
      }
      return n
    }
    const resyncsBefore = await resyncs()
    const emitting = emitSteadily(runtime, 300, 20, 1)
    await until('events flowing', () => viewers.every((v) => v.ids.length > 10))
    const promoted = await cluster.killMaster(index, { rejoin: true })
    assert.notEqual(promoted.port, masters[index]?.port, 'the slot is served by the promoted replica')
    const last = await emitting
    await until('every viewer caught up', () => viewers.every((v) => v.seqs().at(-1) === last))
    for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
    // The live subscriptions moved to the new master, and each gateway read its streams from its cursor.
    assert.ok((await resyncs()) > resyncsBefore, 'the gateways resynchronised after the failover')
    // One shard's failover is no outage of the cluster: neither gateway is left degraded.
    for (const gw of gateways) {
      const ready = JSON.parse((await request(`${gw.url}/readyz`)).body) as {
        status: string
        checks: { redis?: string }
      }
      assert.equal(ready.checks.redis, 'ok', JSON.stringify(ready))
      assert.equal(ready.status, 'ready')
    }
  })

  test('change feed: when ioredis moves the subscriptions to another node, every listener re-reads', async (t) => {
    const subscriber = await storeConnection(t, onCluster, 'subscriber')
    const command = await storeConnection(t, onCluster)
    const feed = new ChangeFeed(subscriber, pino({ level: 'silent' }))
    const channel = `${uniquePrefix()}changed`
    const heard: string[] = []
    let resyncs = 0
    await feed.listen(channel, { message: (m) => heard.push(m), resync: () => resyncs++ })
    await command.publish(channel, 'one')
    await until('the first message', () => heard.includes('one'))
    // The node ioredis subscribes through: the one with a client of ours holding a subscription.
    assert.ok(subscriber instanceof Cluster)
    const name = String(subscriber.options.redisOptions?.connectionName)
    const holder = async (): Promise<{ port: number; id: string } | undefined> => {
      for (const port of cluster.ports) {
        const list = String(
          await cluster
            .node(port)
            .client('LIST')
            .catch(() => ''),
        )
        const line = list.split('\n').find((l) => l.includes(name) && /\bsub=[1-9]/.test(l))
        const id = line?.match(/\bid=(\d+)/)?.[1]
        if (id !== undefined) return { port, id }
      }
      return undefined
    }
    const before = await holder()
    assert.ok(before, 'a subscribed connection of ours on some node')
    // What a node's death or a dropped socket does to it: ioredis resubscribes elsewhere, with no event.
    await cluster.node(before.port).client('KILL', 'ID', before.id)
    await until('every listener re-read after the move', () => resyncs > 0)
    await command.publish(channel, 'two')
    await until('messages still arrive', () => heard.includes('two'))
  })

  test('events: a dropped sharded subscriber connection is replaced and the viewers miss nothing', async (t) => {
    const { runtime, viewers } = await watchedSession(t, 'ev-dropped')
    const emitting = emitSteadily(runtime, 150, 20, 1)
    await until('events flowing', () => viewers.every((v) => v.ids.length > 10))
    // Every gateway's sharded subscriber connections (`ioredis-cluster(ssubscriber):<name>:live`), on every node.
    let killed = 0
    for (const port of cluster.ports) {
      const node = cluster.node(port)
      const list = String(await node.client('LIST').catch(() => ''))
      for (const line of list
        .split('\n')
        .filter((l) => l.includes('(ssubscriber)') && /\bssub=[1-9]/.test(l))) {
        const id = line.match(/\bid=(\d+)/)?.[1]
        if (id !== undefined && Number(await node.client('KILL', 'ID', id)) === 1) killed++
      }
    }
    assert.ok(killed >= 2, `a subscribed connection of each gateway killed (${killed})`)
    const last = await emitting
    await until('every viewer caught up', () => viewers.every((v) => v.seqs().at(-1) === last))
    for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
  })

  test("key rotation: the re-seal's compare-and-set (registry and job lease in one slot) runs on the cluster", async (t) => {
    const prefix = uniquePrefix()
    const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
    const old = await startGateway(clusterEnv(prefix))
    await putSession(old, admin, 'sealed-old')
    await old.close()
    // The new key first, the old one still opening: the one replica re-seals what it finds on the old key.
    const NEW_KEY = 'T3RoZXItdGVzdC1rZXktMzItYnl0ZXMtbG9uZy4uLi4'
    const gw = await gateway(t, {
      ...clusterEnv(prefix),
      GATEWAY_ENCRYPTION_KEY: `${NEW_KEY},${TEST_ENCRYPTION_KEY}`,
      GATEWAY_LEASE_MS: '1000',
    })
    const gauge = async (name: string) =>
      (await gw.app.metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value ?? -1
    const resealed = async () => {
      const metric = await gw.app.metrics.registry.getSingleMetric('krg_sessions_resealed_total')?.get()
      return metric?.values.find((v) => v.labels.result === 'resealed')?.value ?? 0
    }
    await until('the record re-sealed with the new key', async () => (await resealed()) === 1)
    assert.equal(await gauge('krg_sessions_on_old_key'), 0)
    const got = await request(`${gw.url}/admin/sessions/sealed-old`, { headers: { authorization: admin } })
    assert.equal(got.status, 200)
  })

  test('cookie store: a logout everywhere between the two steps of a sign-in leaves the new session findable', async (t) => {
    const keys = storeKeys(t, onCluster)
    const command = await storeConnection(t, onCluster)
    const store = new RedisCookieStore({ command, keys, idleMs: 60_000 })
    const now = Date.now()
    const record = {
      sub: 'sam',
      roles: ['operator' as const],
      teams: ['blue'],
      createdAt: now,
      expiresAt: now + 3600_000,
      lastSeenAt: now,
    }
    await store.create('s1', record)
    // A sign-in's first step on a Redis Cluster (the person's set, its own slot), its second not yet made.
    await command.sadd(keys.cookiesOf('sam'), 's2')
    assert.equal(await store.revokeAllOf('sam'), 1)
    assert.equal(
      await command.sismember(keys.cookiesOf('sam'), 's1'),
      0,
      'the revoked session leaves the set',
    )
    assert.equal(await command.sismember(keys.cookiesOf('sam'), 's2'), 1, 'the one being made stays listed')
    // Its second step: a later logout everywhere finds it.
    await store.create('s2', record)
    assert.equal(await store.revokeAllOf('sam'), 1)
    assert.equal((await store.get('s2'))?.state, 'revoked')
  })

  // Last: it stops the cluster.
  test('the whole Redis Cluster gone: a gateway that was up serves degraded', async (t) => {
    const gw = await gateway(t, clusterEnv(uniquePrefix()))
    await until('ready', async () => (await request(`${gw.url}/readyz`)).status === 200)
    await cluster.stop()
    await until(
      'degraded',
      async () => JSON.parse((await request(`${gw.url}/readyz`)).body).status === 'degraded',
    )
    const ready = await request(`${gw.url}/readyz`)
    assert.equal(ready.status, 200, 'degraded is ready: the balancer keeps sending')
    assert.match(JSON.parse(ready.body).checks.redis, /degraded: redis \w+ connection lost/)
  })
})
