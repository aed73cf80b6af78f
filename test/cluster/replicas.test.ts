import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Redis } from 'ioredis'
import { bearer } from '../helpers/jwt.ts'
import {
  type Cluster,
  contiguity,
  emitSteadily,
  leaseHolders,
  RoamingViewer,
  request,
  startCluster,
  TOKEN,
} from './cluster-harness.ts'
import { until } from './redis-harness.ts'

/**
 * Three real replicas on one Redis: fan-out to viewers on every replica from one upstream connection,
 * fixed Redis connections, and the shared state (registry, cookie sessions, audit, presence).
 */
describe('three replicas', () => {
  let c: Cluster
  let redis: Redis
  const viewers: RoamingViewer[] = []
  const cleanups: (() => unknown)[] = []
  before(async () => {
    c = await startCluster({ after: (fn) => void cleanups.push(fn) }, 3)
    redis = new Redis(c.redis.url)
    await c.addSession('k1')
  })
  after(async () => {
    for (const v of viewers) v.close()
    redis?.disconnect()
    for (const fn of cleanups.reverse()) await fn()
  })

  test('events reach every viewer on every replica, in order, once, from one upstream connection', async () => {
    const bob = await bearer({ sub: 'bob', roles: ['viewer'], teams: ['blue'] }, { expiresIn: '1h' })
    const carol = await bearer({ sub: 'carol', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
    const urls = () => c.replicas.map((r) => r.url)
    for (let i = 0; i < 9; i++) {
      const v = new RoamingViewer('k1', i % 3 === 0 ? bob : carol, urls, i % 3)
      viewers.push(v)
      v.start()
    }
    await until('every viewer has the run info', () => viewers.every((v) => v.ids.length >= 1))
    await until('one upstream stream', () => c.runtime.openEventStreams === 1)

    const last = await emitSteadily(c.runtime, 200, 5, 2)
    await until('every viewer has every event', () => viewers.every((v) => v.seqs().at(-1) === last))
    for (const v of viewers) {
      assert.equal(contiguity(v.seqs(), 1, last), 'ok', `viewer on replica ${v.server}`)
      assert.equal(v.reconnects, 0)
    }
    assert.equal(c.runtime.openEventStreams, 1, 'exactly one upstream connection for 9 viewers on 3 replicas')
    assert.equal(c.runtime.eventConnections, 1, 'and it never had to reconnect')
    assert.deepEqual((await leaseHolders(c.replicas)).length, 1, 'one replica holds the lease')
  })

  test('each replica keeps three Redis connections, whatever the viewers and sessions', async () => {
    const count = async () =>
      String(await redis.client('LIST'))
        .split('\n')
        .filter((l) => l.includes(`name=${c.prefix}`)).length
    assert.equal(await count(), 9, 'command, live and subscriber on each of 3 replicas')
    await c.addSession('k2')
    const token = await bearer({ sub: 'dave', roles: ['viewer'], teams: ['blue'] }, { expiresIn: '1h' })
    const more: RoamingViewer[] = []
    for (let i = 0; i < 30; i++) {
      const v = new RoamingViewer(i % 2 ? 'k1' : 'k2', token, () => c.replicas.map((r) => r.url), i % 3)
      more.push(v)
      viewers.push(v)
      v.start()
    }
    await until('the new viewers are streaming', () => more.every((v) => v.ids.length >= 1))
    assert.equal(await count(), 9, 'still 9 with 39 viewers of 2 sessions')
    assert.equal(c.runtime.openEventStreams, 2, 'one upstream stream per session in the cluster')
  })

  test('an admin change on one replica is seen by all, tokens stored encrypted, audit shared', async () => {
    const put = await request(`${c.replicas[2]?.url}/admin/sessions/k3`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${c.admin}`, 'content-type': 'application/json' },
      // The team of k1 and k2: their runtime cannot be registered for another team's session.
      body: JSON.stringify({
        upstream: c.runtime.url,
        team: 'blue',
        messagingToken: 'a-second-secret-token',
      }),
    })
    assert.equal(put.status, 201)
    for (const r of c.replicas) {
      await until(
        `replica ${r.index} sees k3`,
        async () =>
          (await request(`${r.url}/admin/sessions/k3`, { headers: { authorization: `Bearer ${c.admin}` } }))
            .status === 200,
      )
    }
    const raw = await redis.hgetall(`${c.prefix}sessions`)
    assert.deepEqual(Object.keys(raw).sort(), ['k1', 'k2', 'k3'])
    const dump = JSON.stringify(raw)
    assert.ok(!dump.includes(TOKEN) && !dump.includes('a-second-secret-token'), 'no token in Redis')
    assert.equal(String(JSON.parse(raw.k3 ?? '{}').token).split('.').length, 5, 'a compact JWE')

    const del = await request(`${c.replicas[0]?.url}/admin/sessions/k3`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${c.admin}` },
    })
    assert.equal(del.status, 204)
    for (const r of c.replicas) {
      await until(
        `replica ${r.index} forgot k3`,
        async () =>
          (await request(`${r.url}/admin/sessions/k3`, { headers: { authorization: `Bearer ${c.admin}` } }))
            .status === 404,
      )
    }
    await until('audit records of writes made on replicas 2 and 0, read on replica 1', async () => {
      const res = await request(`${c.replicas[1]?.url}/admin/audit?kasmId=k3`, {
        headers: { authorization: `Bearer ${c.admin}` },
      })
      const records = (JSON.parse(res.body) as { records: { action?: string }[] }).records
      return records.map((r) => r.action).join(',') === 'delete,create'
    })
  })

  test('a rotated token reaches the reader whichever replica holds it', async () => {
    const holder = (await leaseHolders(c.replicas))[0]
    const other = c.replicas.find((r) => r.index !== holder) ?? c.replicas[0]
    const probe = new RoamingViewer('k1', c.admin, () => c.replicas.map((r) => r.url), holder ?? 0)
    viewers.push(probe)
    probe.start()
    await until('probe streaming', () => probe.ids.length > 0)
    c.runtime.rotateTokens({ messagingToken: 'rotated-token-0123' })
    c.runtime.dropStreams()
    // The reader now gets 401 from the runtime until the registry (changed on another replica) says otherwise.
    const put = await request(`${other?.url}/admin/sessions/k1`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${c.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ upstream: c.runtime.url, team: 'blue', messagingToken: 'rotated-token-0123' }),
    })
    assert.equal(put.status, 200)
    const seq = c.runtime.emit('log', { level: 'info', msg: 'after rotation' }).seq
    await until('event after the rotation delivered', () => probe.seqs().includes(seq))
  })

  test('a logout on one replica is refused by every replica at once', async () => {
    const dave = await bearer({ sub: 'erin', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
    const login = await request(`${c.replicas[1]?.url}/auth/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dave}` },
    })
    assert.equal(login.status, 201)
    const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? ''
    assert.match(cookie, /^krg_session=/)
    for (const r of c.replicas) {
      assert.equal((await request(`${r.url}/auth/me`, { headers: { cookie } })).status, 200)
    }
    const logout = await request(`${c.replicas[0]?.url}/auth/session`, {
      method: 'DELETE',
      headers: { cookie, origin: 'http://gateway.test' },
    })
    assert.equal(logout.status, 204)
    for (const r of c.replicas) {
      const me = await request(`${r.url}/auth/me`, { headers: { cookie } })
      assert.equal(me.status, 401, `replica ${r.index} refuses the signed-out cookie`)
    }
  })
})
