import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { openSse, type SseClient } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { startCluster } from './cluster-harness.ts'
import { until } from './redis-harness.ts'

test('the per-operator stream cap holds over every replica, and a dead replica gives its slots back', async (t) => {
  const c = await startCluster(t, 3, {
    GATEWAY_MAX_STREAMS_PER_OPERATOR: '3',
    GATEWAY_PRESENCE_TTL_MS: '1500',
  })
  await c.addSession('k1')
  const auth = {
    authorization: `Bearer ${await bearer({ sub: 'olga', roles: ['viewer'], teams: ['blue'] }, { expiresIn: '1h' })}`,
  }
  const open: SseClient[] = []
  t.after(() => {
    for (const v of open) v.close()
  })
  const stream = async (replica: number): Promise<SseClient> => {
    const v = await openSse(`${c.replicas[replica]?.url}/desktop/k1/mcp/events`, auth)
    if (v.status === 200) open.push(v)
    return v
  }
  // Two on replica 0, one on replica 1: the cap of 3 is reached for the whole cluster.
  for (const replica of [0, 0, 1]) assert.equal((await stream(replica)).status, 200)
  for (const replica of [0, 1, 2]) {
    const refused = await stream(replica)
    assert.equal(refused.status, 429, `replica ${replica}`)
    assert.equal((refused.body as { error: string }).error, 'too_many_streams')
  }
  // Closing one frees a slot anywhere.
  open.shift()?.close()
  await until('a slot to be free on replica 2', async () => {
    const v = await stream(2)
    return v.status === 200
  })

  // Replica 0 dies holding one stream: its slot is not given back, it expires.
  assert.equal((await stream(1)).status, 429)
  c.replicas[0]?.child.kill('SIGKILL')
  await c.replicas[0]?.exited
  // Over ten TTLs (1.5 s): generous for a loaded machine, and a slot kept alive past its TTL fails.
  await until('the dead replica slot to expire', async () => (await stream(1)).status === 200, 20_000)
  assert.equal((await stream(2)).status, 429, 'the cap holds again')
  // The slots of live replicas are renewed (by Redis's clock) long past their first TTL, so they hold.
  const redis = new Redis(c.redis.url)
  t.after(() => redis.disconnect())
  const key = `${c.prefix}slots:olga`
  const scores = async () =>
    (await redis.zrange(key, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2 === 1).map(Number)
  const first = Math.max(...(await scores()))
  await until('every slot renewed past two TTLs', async () => {
    const now = await scores()
    return now.length === 3 && Math.min(...now) > first + 3000
  })
  assert.equal((await stream(2)).status, 429, 'renewed slots still count')
})
