import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { type Replica, request, startReplica, TEST_ENCRYPTION_KEY } from '../cluster/cluster-harness.ts'
import { startRedisServer, uniquePrefix, until } from '../cluster/redis-harness.ts'
import { startFakeKasm } from '../fixtures/kasm-api.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { API_KEY, API_SECRET, GATEWAY_USER } from './helpers.ts'

/** Two real replicas on a real Redis, one fake Kasm: one sync for the cluster, each removal made once. */

test('two replicas reconcile once, not twice; the other takes over when the syncing one dies', async (t) => {
  const redis = await startRedisServer()
  t.after(() => redis.stop())
  const kasm = await startFakeKasm({ auth: 'body' })
  t.after(() => kasm.close())
  const env = testEnv({
    LOG_LEVEL: 'warn',
    REDIS_URL: redis.url,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_REDIS_PREFIX: uniquePrefix(),
    GATEWAY_LEASE_MS: '1000',
    GATEWAY_KASM_API_URL: kasm.url,
    GATEWAY_KASM_API_KEY: API_KEY,
    GATEWAY_KASM_API_SECRET: API_SECRET,
    GATEWAY_KASM_UPSTREAM: 'template',
    GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-{kasmId}.sessions.internal:9434/',
    GATEWAY_KASM_SYNC_S: '1',
    GATEWAY_KASM_USER_ID: GATEWAY_USER,
  })
  const replicas: Replica[] = []
  t.after(async () => {
    for (const r of replicas) if (r.alive()) r.child.kill('SIGKILL')
    await Promise.all(replicas.map((r) => r.exited))
  })
  replicas.push(...(await Promise.all([startReplica(0, env), startReplica(1, env)])))
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] }, { expiresIn: '1h' })
  const auth = { authorization: `Bearer ${admin}` }
  const get = async (r: Replica, path: string) =>
    JSON.parse((await request(`${r.url}${path}`, { headers: auth })).body)
  const listed = async (r: Replica): Promise<string[]> =>
    ((await get(r, '/admin/sessions')).sessions as { kasmId: string }[]).map((s) => s.kasmId).sort()
  const metric = async (r: Replica, name: string): Promise<number> => {
    const text = (await request(`${r.url}/metrics`)).body
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0)
  }

  const ids: string[] = []
  for (let i = 0; i < 4; i++) {
    const res = await request(`${replicas[i % 2]?.url}/admin/sessions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'Chrome', team: 'blue' }),
    })
    assert.equal(res.status, 201, res.body)
    ids.push((JSON.parse(res.body) as { kasmId: string }).kasmId)
  }
  for (const r of replicas)
    await until(`replica ${r.index} lists all four`, async () => (await listed(r)).length === 4)

  // Only one replica asks Kasm (told apart by the User-Agent each sends).
  const mark = kasm.calls.length
  await until('three syncs', () => kasm.calls.slice(mark).filter((c) => c.call === 'get_kasms').length >= 3)
  const syncing = new Set(
    kasm.calls
      .slice(mark)
      .filter((c) => c.call === 'get_kasms')
      .map((c) => c.userAgent),
  )
  assert.equal(syncing.size, 1, `one replica syncs: ${[...syncing].join(', ')}`)
  const holders = await Promise.all(replicas.map((r) => metric(r, 'krg_kasm_sync_holder')))
  assert.deepEqual([...holders].sort(), [0, 1])

  const [a, b, c] = ids as [string, string, string, string]
  for (const id of [a, b]) await kasm.destroy(id)
  for (const r of replicas) {
    await until(`replica ${r.index} no longer lists them`, async () => (await listed(r)).length === 2)
  }
  const removals = async (r: Replica) =>
    ((await get(r, '/admin/audit?sub=system:kasm-sync')).records as AuditRecord[]).map((x) => x.kasmId).sort()
  // Either replica may have made the removals; another's records reach the shared log within 100 ms.
  await until('one audit record per removal', async () => {
    const got = await removals(replicas[1] as Replica)
    assert.ok(got.length <= 2, `never more than one per removal: ${got}`)
    return got.length === 2
  })
  assert.deepEqual(await removals(replicas[1] as Replica), [a, b].sort(), 'one audit record per removal')
  const removed = await Promise.all(replicas.map((r) => metric(r, 'krg_kasm_sessions_removed_total')))
  assert.equal(removed[0]! + removed[1]!, 2, 'each removal made once in the cluster')

  // The syncing replica dies; the other one takes the job over and carries on.
  const now = await Promise.all(replicas.map((r) => metric(r, 'krg_kasm_sync_holder')))
  const holder = replicas[now.indexOf(1)] as Replica
  const survivor = replicas.find((r) => r !== holder) as Replica
  holder.child.kill('SIGKILL')
  await holder.exited
  await kasm.destroy(c)
  await until('the survivor removes it', async () => !(await listed(survivor)).includes(c))
  assert.deepEqual(await removals(survivor), [a, b, c].sort())
  assert.equal(await metric(survivor, 'krg_kasm_sync_holder'), 1)
})
