import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { bearer } from '../helpers/jwt.ts'
import {
  clusterTestEnv,
  contiguity,
  emitSteadily,
  type Replica,
  RoamingViewer,
  request,
  startReplica,
  stopReplicas,
  TOKEN,
} from './cluster-harness.ts'
import { uniquePrefix, until } from './redis-harness.ts'
import { DATA_PASSWORD, MASTER_NAME, SENTINEL_PASSWORD, startSentinelGroup } from './sentinel-harness.ts'

/**
 * Redis Sentinel with real processes: a master, its replica and three sentinels (passwords on the data nodes
 * and on the sentinels). Two gateway replicas find the master through the sentinels; a forced failover moves
 * it while events flow, and the gateways follow it: viewers miss nothing, writes land on the new master.
 */
test('Sentinel: replicas find the master, follow a failover while events flow, and lose nothing', async (t) => {
  const group = await startSentinelGroup()
  t.after(() => group.stop())
  const runtime = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 5000 })
  t.after(() => runtime.close())
  const env = clusterTestEnv(uniquePrefix(), {
    GATEWAY_REDIS_SENTINELS: group.sentinelsVariable,
    GATEWAY_REDIS_SENTINEL_MASTER: MASTER_NAME,
    GATEWAY_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    // With Sentinel, REDIS_URL carries only the master's password and database (the host is not used).
    REDIS_URL: `redis://:${DATA_PASSWORD}@${MASTER_NAME}/0`,
  })
  const prefix = env.GATEWAY_REDIS_PREFIX ?? ''
  const replicas: Replica[] = []
  t.after(() => stopReplicas(replicas))
  replicas.push(...(await Promise.all([startReplica(0, env), startReplica(1, env)])))
  const logs = () => replicas.flatMap((r) => r.output).join('\n')

  const admin = await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] }, { expiresIn: '1h' })
  const register = (kasmId: string) =>
    request(`${replicas[0]?.url}/admin/sessions/${kasmId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: TOKEN }),
    })
  assert.equal((await register('k')).status, 201)
  const firstMaster = await group.masterPort()
  assert.equal(firstMaster, group.dataPorts[0])
  // The registry is on the master Sentinel named, under the prefix, with the token encrypted.
  const stored = await group.data(firstMaster).hget(`${prefix}sessions`, 'k')
  assert.ok(
    stored && !stored.includes(TOKEN),
    `the registry on ${firstMaster}: ${stored}; Sentinel names ${await group.masterPort()} now, and ${firstMaster} is ${(await group.data(firstMaster).role())[0]}`,
  )
  for (const r of replicas) {
    await until(`replica ${r.index} knows k`, async () => {
      const got = await request(`${r.url}/admin/sessions/k`, {
        headers: { authorization: `Bearer ${admin}` },
      })
      return got.status === 200
    })
  }

  const viewer = await bearer({ sub: 'bob', roles: ['viewer'], teams: ['blue'] }, { expiresIn: '1h' })
  const viewers = [0, 1, 2, 3].map((i) => new RoamingViewer('k', viewer, () => replicas.map((r) => r.url), i))
  t.after(() => {
    for (const v of viewers) v.close()
  })
  for (const v of viewers) v.start()
  await until('viewers streaming', () => viewers.every((v) => v.ids.length > 0))

  const emitting = emitSteadily(runtime, 300, 20, 1)
  await until('events flowing', () => viewers.every((v) => v.ids.length > 5))
  const newMaster = await group.failover()
  assert.equal(newMaster, group.dataPorts[1])
  assert.equal((await group.data(firstMaster).role())[0], 'slave', 'the old master was demoted')

  // Writes reach the new master: the gateways moved their connections (a demoted master refuses writes).
  await until(
    'an admin write succeeds after the failover',
    async () => (await register('k2')).status === 201,
  ).catch(() => assert.fail(`admin write never succeeded:\n${logs()}`))
  assert.ok(await group.data(newMaster).hget(`${prefix}sessions`, 'k2'))
  const last = await emitting
  await until('every viewer caught up', () => viewers.every((v) => v.seqs().at(-1) === last)).catch(() =>
    assert.fail(`viewers at ${viewers.map((v) => v.seqs().at(-1)).join(',')} of ${last}:\n${logs()}`),
  )
  for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer ${v.server}`)
  for (const r of replicas) {
    const ready = JSON.parse((await request(`${r.url}/readyz`)).body) as { status: string }
    assert.equal(ready.status, 'ready', `replica ${r.index} is ready on the new master`)
    assert.ok(r.alive())
  }
  await until('one upstream stream', () => runtime.openEventStreams === 1)
  t.diagnostic(`viewer reconnects: ${viewers.map((v) => v.reconnects).join(',')}; events ${last}`)
})
