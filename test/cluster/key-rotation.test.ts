import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { calculateJwkThumbprint, decodeProtectedHeader } from 'jose'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import {
  contiguity,
  type Replica,
  RoamingViewer,
  request,
  startReplica,
  TEST_ENCRYPTION_KEY,
  TOKEN,
} from './cluster-harness.ts'
import { startRedisServer, uniquePrefix, until } from './redis-harness.ts'

/**
 * Issue 16's rolling rotation, as an operator runs it: two real replicas on a real Redis, restarted one at a
 * time through every step of docs/cluster.md, while viewers stream and operators write.
 */

const OLD = TEST_ENCRYPTION_KEY
const NEW = 'Um90YXRpb24tdGFyZ2V0LWtleS0zMi1ieXRlcy1sb24'
const SESSIONS = ['rot-1', 'rot-2', 'rot-3', 'rot-4', 'rot-5', 'rot-6']

test('a rolling key rotation: never unready, nothing lost, every record on the new key at the end', async (t) => {
  const redis = await startRedisServer()
  t.after(() => redis.stop())
  // mcp mode: messages stay pending, so the trace holds only what this test emits and one event per message.
  const runtime = await startSimulatedRuntime({
    messagingToken: TOKEN,
    pingIntervalMs: 5000,
    consumer: 'external',
  })
  t.after(() => runtime.close())
  const env = testEnv({
    LOG_LEVEL: 'warn',
    REDIS_URL: redis.url,
    GATEWAY_REDIS_PREFIX: uniquePrefix(),
    GATEWAY_LEASE_MS: '1000',
    GATEWAY_STREAM_LINGER_MS: '0',
    GATEWAY_UPSTREAM_RETRY_SCALE: '0.05',
    GATEWAY_PING_INTERVAL_MS: '1000',
    GATEWAY_SHUTDOWN_GRACE_MS: '4000',
    GATEWAY_RATE_LIMIT_MAX: '100000',
  })
  const keysOf = (keys: string[]) => ({ ...env, GATEWAY_ENCRYPTION_KEY: keys.join(',') })

  // The replicas in service: started, ready, and not yet told to stop. Only these are probed and used.
  const live: (Replica | undefined)[] = []
  const output: string[] = []
  t.after(async () => {
    for (const r of live) if (r?.alive()) r.child.kill('SIGKILL')
  })
  const replace = async (index: number, keys: string[]) => {
    const old = live[index]
    live[index] = undefined
    if (old) {
      old.child.kill('SIGTERM')
      await old.exited
      output.push(...old.output)
    }
    live[index] = await startReplica(index, keysOf(keys))
  }
  const urls = () => live.filter((r): r is Replica => r?.alive() === true).map((r) => r.url)
  const logs = () => [...output, ...live.flatMap((r) => r?.output ?? [])].join('\n')

  await replace(0, [OLD])
  await replace(1, [OLD])
  const admin = await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] }, { expiresIn: '1h' })
  const operator = await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
  for (const kasmId of SESSIONS) {
    const res = await request(`${urls()[0]}/admin/sessions/${kasmId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: TOKEN }),
    })
    assert.equal(res.status, 201, res.body)
  }

  // Readiness of every replica in service, all the time.
  const unready: string[] = []
  let probing = true
  t.after(() => {
    probing = false
  })
  const prober = (async () => {
    while (probing) {
      for (const r of [...live]) {
        if (!r) continue
        const res = await request(`${r.url}/readyz`).catch(() => null)
        // A replica told to stop meanwhile has left `live`: its draining answer is expected.
        if (res && res.status !== 200 && live.includes(r)) unready.push(`r${r.index}: ${res.body}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })()

  // Viewers roam to the other replica whenever theirs restarts.
  const viewers = [0, 1].map((i) => new RoamingViewer('rot-1', operator, urls, i))
  for (const v of viewers) v.start()
  t.after(() => {
    for (const v of viewers) v.close()
  })
  await until('viewers streaming', () => viewers.every((v) => v.ids.length >= 1), 15_000)

  // Operators keep writing to every session; a write that meets a stopping replica is retried elsewhere
  // with the same key, as the protocol's idempotency allows.
  const acknowledged = new Map<string, number>()
  let writing = true
  let sent = 0
  t.after(() => {
    writing = false
  })
  const writer = (async () => {
    while (writing) {
      const kasmId = SESSIONS[sent % SESSIONS.length] as string
      const key = `k-${sent++}`
      for (let attempt = 0; writing; attempt++) {
        const target = urls()[attempt % Math.max(1, urls().length)]
        const res = target
          ? await request(`${target}/desktop/${kasmId}/mcp/messages`, {
              method: 'POST',
              headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json' },
              body: JSON.stringify({ run: runtime.run, key, text: `hello ${key}` }),
            }).catch(() => null)
          : null
        if (res && (res.status === 202 || res.status === 200)) {
          acknowledged.set(key, res.status)
          await new Promise((resolve) => setTimeout(resolve, 20))
          break
        }
        if (res && res.status !== 503 && res.status !== 502)
          assert.fail(`write refused: ${res.status} ${res.body}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
  })()
  let emitting = true
  let lastSeq = 0
  t.after(() => {
    emitting = false
  })
  const emitter = (async () => {
    while (emitting) {
      lastSeq = runtime.emit('log', { level: 'info', msg: `event ${lastSeq}` }).seq
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })()

  const onOldKey = async (r: Replica) => {
    const metrics = (await request(`${r.url}/metrics`)).body
    return Number(/^krg_sessions_on_old_key (\d+)/m.exec(metrics)?.[1] ?? Number.NaN)
  }

  try {
    // 1. The new key second on every replica: it opens, nothing changes yet.
    await replace(0, [OLD, NEW])
    await replace(1, [OLD, NEW])
    // 2. The new key first on every replica: new writes are sealed with it, the rest re-sealed in the background.
    await replace(0, [NEW, OLD])
    await replace(1, [NEW, OLD])
    // 3. Wait for the metric to reach zero on every replica.
    const agreedAt = Date.now()
    await until(
      'every record on the new key',
      async () => {
        for (const r of live) if (!r || (await onOldKey(r)) !== 0) return false
        return true
      },
      20_000,
    )
    t.diagnostic(`every record on the new key ${Date.now() - agreedAt} ms after the last replica restarted`)
    // 4. The old key removed.
    await replace(0, [NEW])
    await replace(1, [NEW])
    await until(
      'writes acknowledged after the last restart',
      () => acknowledged.size >= sent - 1 && sent > 40,
    )
  } finally {
    writing = false
    emitting = false
    await writer
    await emitter
  }
  lastSeq = runtime.emit('log', { level: 'info', msg: 'the end' }).seq
  await until(
    'every viewer has every event',
    () => viewers.every((v) => v.seqs().at(-1) === lastSeq),
    15_000,
  ).catch((err: Error) => {
    const state = viewers.map(
      (v) => `${v.seqs().at(-1)}/${lastSeq} ${contiguity(v.seqs(), 1, lastSeq)} r=${v.reconnects}`,
    )
    throw new Error(`${err.message}: ${state.join('; ')}\n${logs()}`)
  })
  probing = false
  await prober

  assert.deepEqual(unready, [], `a replica in service was unready:\n${logs()}`)
  for (const v of viewers) assert.equal(contiguity(v.seqs(), 1, lastSeq), 'ok')
  // No lost session: both replicas serve all of them, and every write reached the runtime.
  for (const url of urls()) {
    const listed = JSON.parse(
      (await request(`${url}/admin/sessions`, { headers: { authorization: `Bearer ${admin}` } })).body,
    ) as { sessions: { kasmId: string }[] }
    assert.deepEqual(listed.sessions.map((s) => s.kasmId).sort(), SESSIONS)
  }
  // Every session's upstream is the one simulated runtime: its inbox holds every session's writes.
  const inbox = JSON.parse(
    (
      await request(`${urls()[0]}/desktop/rot-1/mcp/messages`, {
        headers: { authorization: `Bearer ${operator}` },
      })
    ).body,
  ) as { messages: { key: string }[] }
  const received = new Set(inbox.messages.map((m) => m.key))
  for (const key of acknowledged.keys()) assert.ok(received.has(key), `write ${key} reached the runtime`)
  // Every record in Redis is sealed with the new key.
  const newKid = await calculateJwkThumbprint({ kty: 'oct', k: NEW })
  const client = new Redis(redis.url)
  t.after(() => client.disconnect())
  const records = await client.hgetall(`${env.GATEWAY_REDIS_PREFIX}sessions`)
  assert.deepEqual(Object.keys(records).sort(), SESSIONS)
  for (const [kasmId, json] of Object.entries(records)) {
    const header = decodeProtectedHeader((JSON.parse(json) as { token: string }).token)
    assert.equal(header.kid, newKid, `${kasmId} sealed with the new key`)
  }
})
