import assert from 'node:assert/strict'
import { connect, createServer, type Socket } from 'node:net'
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
 * time through every step of docs/cluster.md, while viewers stream and operators write. Issue 24: a replica
 * that boots while the re-seal runs (its first read of the registry older than the re-seal's writes) must end
 * with every record on the new key; the gate makes that interleaving happen on every run.
 */

/**
 * A TCP proxy in front of Redis for one replica. It passes everything through until armed; armed, the first
 * connection that asks for the whole session registry (`HGETALL <prefix>sessions`) gets that answer, and every
 * answer after it, only on `release`. The command reaches Redis at once, so the test decides what changes
 * in Redis between the replica's read and the replica seeing what it read.
 */
interface RegistryReadGate {
  readonly url: string
  arm(): void
  /** Resolves once an armed gate holds a registry read. */
  readonly held: Promise<void>
  release(): void
  close(): Promise<void>
}

async function startRegistryReadGate(redisPort: number, registryKey: string): Promise<RegistryReadGate> {
  const hgetall = Buffer.from(`$7\r\nhgetall\r\n$${Buffer.byteLength(registryKey)}\r\n${registryKey}\r\n`)
  let armed = false
  let holding: { readonly chunks: Buffer[]; readonly client: Socket } | null = null
  let released = false
  let onHeld: () => void = () => {}
  const held = new Promise<void>((resolve) => {
    onHeld = resolve
  })
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(redisPort, '127.0.0.1')
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    client.on('data', (chunk: Buffer) => {
      // ioredis writes command names in lower case.
      if (
        armed &&
        holding === null &&
        chunk.toString('latin1').toLowerCase().includes(hgetall.toString('latin1'))
      ) {
        holding = { chunks: [], client }
        onHeld()
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (holding?.client === client && !released) holding.chunks.push(chunk)
      else client.write(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    url: `redis://127.0.0.1:${port}`,
    arm: () => {
      armed = true
    },
    held,
    release: () => {
      released = true
      if (holding !== null) for (const chunk of holding.chunks.splice(0)) holding.client.write(chunk)
    },
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

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
  // Replica 1 reaches Redis through the gate; its commands may wait for the gate, not time out.
  const gate = await startRegistryReadGate(redis.port, `${env.GATEWAY_REDIS_PREFIX}sessions`)
  t.after(() => gate.close())
  const envOf = (index: number, keys: string[]) => ({
    ...env,
    GATEWAY_ENCRYPTION_KEY: keys.join(','),
    ...(index === 1 ? { REDIS_URL: gate.url, GATEWAY_REDIS_COMMAND_TIMEOUT_MS: '30000' } : {}),
  })

  // The replicas in service: started, ready, and not yet told to stop. Only these are probed and used.
  const live: (Replica | undefined)[] = []
  const output: string[] = []
  t.after(async () => {
    for (const r of live) if (r?.alive()) r.child.kill('SIGKILL')
  })
  /** Takes a replica out of service and stops it (SIGTERM), keeping its output. */
  const stop = async (index: number) => {
    const old = live[index]
    live[index] = undefined
    if (old) {
      old.child.kill('SIGTERM')
      await old.exited
      output.push(...old.output)
    }
  }
  const replace = async (index: number, keys: string[]) => {
    await stop(index)
    live[index] = await startReplica(index, envOf(index, keys))
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
  // Replica 1 learns of them from replica 0's announcements, a moment later: the rotation starts once both know
  // every session. (A loaded run had a write refused with 404, most likely replica 1's before it had read one.)
  for (const r of live)
    for (const kasmId of SESSIONS)
      await until(
        `replica ${r?.index} knows ${kasmId}`,
        async () =>
          (
            await request(`${r?.url}/admin/sessions/${kasmId}`, {
              headers: { authorization: `Bearer ${admin}` },
            })
          ).status === 200,
      )

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
  await until('viewers streaming', () => viewers.every((v) => v.ids.length >= 1))

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
          assert.fail(`write to ${target} refused: ${res.status} ${res.body}\n${logs()}`)
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
  const newKid = await calculateJwkThumbprint({ kty: 'oct', k: NEW })
  const client = new Redis(redis.url)
  t.after(() => client.disconnect())
  /** The key each record in Redis is sealed with, by kasmId. */
  const storedKids = async () => {
    const records = await client.hgetall(`${env.GATEWAY_REDIS_PREFIX}sessions`)
    return Object.entries(records).map(([kasmId, json]) => [
      kasmId,
      decodeProtectedHeader((JSON.parse(json) as { token: string }).token).kid,
    ])
  }

  try {
    // 1. The new key second on every replica: it opens, nothing changes yet.
    await replace(0, [OLD, NEW])
    await replace(1, [OLD, NEW])
    // 2. The new key first on every replica: new writes are sealed with it, the rest re-sealed in the background.
    await replace(0, [NEW, OLD])
    // Replica 1 rolls with a surge, as the chart's Deployment does (maxSurge 1): its successor boots while it
    // still seals with the old key, so nothing is re-sealed yet. The successor's first read of the registry
    // reaches Redis, its answer held; then the predecessor stops, replica 0 is alone with the new key first
    // and re-seals every record, and only then does the successor see what it read before the re-seal.
    gate.arm()
    const successor = startReplica(1, envOf(1, [NEW, OLD]))
    await gate.held
    await stop(1)
    await until('replica 0 re-sealed every record in Redis', async () =>
      (await storedKids()).every(([, kid]) => kid === newKid),
    )
    gate.release()
    live[1] = await successor
    // 3. The metric is zero on every replica: on the one that re-sealed, and at once on the one whose first
    // read is older than the re-seal (it applies the re-seal's announcements it got meanwhile).
    const zero = live[0] as Replica
    await until('replica 0 counts its own re-seals', async () => (await onOldKey(zero)) === 0)
    assert.equal(
      await onOldKey(live[1] as Replica),
      0,
      `replica 1 ready with records on the old key:\n${logs()}`,
    )
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
  await until('every viewer has every event', () => viewers.every((v) => v.seqs().at(-1) === lastSeq)).catch(
    (err: Error) => {
      const state = viewers.map(
        (v) => `${v.seqs().at(-1)}/${lastSeq} ${contiguity(v.seqs(), 1, lastSeq)} r=${v.reconnects}`,
      )
      throw new Error(`${err.message}: ${state.join('; ')}\n${logs()}`)
    },
  )
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
  const kids = await storedKids()
  assert.deepEqual(kids.map(([kasmId]) => kasmId).sort(), SESSIONS)
  for (const [kasmId, kid] of kids) assert.equal(kid, newKid, `${kasmId} sealed with the new key`)
})
