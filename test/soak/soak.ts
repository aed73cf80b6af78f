/**
 * `npm run soak [-- --seconds 180 --viewers 20 --redis-cluster]`: tries hard to make the event path lose or
 * repeat an event.
 *
 * Three gateway replicas (child processes) on a redis-server of its own, three simulated runtimes emitting
 * steadily, `--viewers` viewers per session that reconnect to another replica with `Last-Event-ID` whenever
 * their stream ends (some of them also cut their own connection now and then). One fault at a time, at
 * random: SIGKILL a replica (restart it), SIGSTOP one past its lease (then SIGCONT), SIGTERM one (it drains;
 * restart it), restart Redis empty, cut every runtime stream, start a new run in every session. After each
 * fault it waits until every viewer has an event emitted after the fault (its recovery time). At the end a
 * sentinel event per session; every viewer must have every event of the sentinel's run from 1 to the sentinel
 * exactly once, in order (earlier runs: no hole, duplicate or reorder), and each runtime one upstream stream.
 * Replica 0, the witness, is never restarted: its heap is sampled and must not keep growing.
 *
 * Prints recoveries per fault kind and the witness's heap; exits 1 on any loss, duplicate, reorder, missing
 * sentinel, unrecovered fault, more than one upstream stream per session at rest, or a growing heap.
 * Loopback only; every child is stopped at the end.
 *
 * `--redis-cluster` runs it on a Redis Cluster of 3 masters + 3 replicas (test/cluster/redis-cluster-harness.ts),
 * the replicas given GATEWAY_REDIS_CLUSTER_NODES, and "restart Redis empty" becomes "fail a master over":
 * SIGKILL a master, wait until its replica is promoted, then start the killed node again as the new master's
 * replica (so every later failover has a replica to promote). A cluster restarted empty would be a new
 * cluster (new node ids, slots assigned again by `redis-cli --cluster create`), an operator's rebuild rather
 * than a fault of a running one; the single-Redis soak keeps that fault, and a failover is the one Redis
 * Cluster adds: writes acknowledged by the old master but not yet replicated are gone from the new one.
 */

import { parseArgs } from 'node:util'
import { configVariables } from '../../src/config.ts'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import {
  clusterTestEnv,
  type Replica,
  RoamingViewer,
  request,
  startReplica,
  stopReplicas,
  TOKEN,
} from '../cluster/cluster-harness.ts'
import { startRedisCluster } from '../cluster/redis-cluster-harness.ts'
import { startRedisServer, uniquePrefix } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { type HeapSample, heapUsed, heapVerdict, runOf, runVerdict, seqOf } from './verdicts.ts'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '180' },
    viewers: { type: 'string', default: '20' },
    seed: { type: 'string' },
    'redis-cluster': { type: 'boolean', default: false },
  },
})
const ON_CLUSTER = values['redis-cluster'] === true
const SECONDS = Math.min(1800, Math.max(20, Number(values.seconds)))
const VIEWERS = Math.min(200, Math.max(1, Number(values.viewers)))
const REPLICAS = 3
const SESSIONS = 3
/** Each runtime emits one event every this many ms. */
const EMIT_MS = 25
/** Longer than GATEWAY_LEASE_MS (2000 in the cluster test environment): the lease expires meanwhile. */
const STOP_MS = 3000
const RECOVERY_LIMIT_MS = 30_000

type FaultKind =
  | 'sigkill'
  | 'sigstop'
  | 'sigterm'
  | 'redis_empty'
  | 'redis_failover'
  | 'cut_runtime'
  | 'new_run'
const KINDS: readonly FaultKind[] = [
  'sigkill',
  'sigstop',
  'sigterm',
  ON_CLUSTER ? 'redis_failover' : 'redis_empty',
  'cut_runtime',
  'new_run',
]
/**
 * Replica 0 is never killed or drained (it may be stopped): the one whose memory lives the whole run, so a
 * leak shows as growth instead of being reset by a restart.
 */
const WITNESS = 0

/** A small seeded generator, so a failing run can be repeated with `--seed`. */
let state = Number(values.seed ?? Date.now() % 2 ** 31) >>> 0
const seed = state
function random(): number {
  state = (state * 1103515245 + 12345) % 2 ** 31
  return state / 2 ** 31
}
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T

/** The Redis of the run: one redis-server, or a Redis Cluster; its fault and the replicas' variables. */
interface SoakRedis {
  readonly env: Record<string, string>
  /** redis_empty: stop, wait, start empty; redis_failover: a master fails over to its replica. */
  fault(): Promise<void>
  stop(): Promise<void>
}

async function startSoakRedis(): Promise<SoakRedis> {
  if (ON_CLUSTER) {
    const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 })
    return {
      // REDIS_URL carries what the nodes' URL would (credentials, TLS); the nodes come from the list.
      env: {
        REDIS_URL: `redis://${cluster.nodes.split(',')[0]}`,
        GATEWAY_REDIS_CLUSTER_NODES: cluster.nodes,
      },
      fault: async () => void (await cluster.killMaster(Math.floor(random() * 3), { rejoin: true })),
      stop: () => cluster.stop(),
    }
  }
  const redis = await startRedisServer()
  return {
    env: { REDIS_URL: redis.url },
    fault: async () => {
      await redis.stop()
      await new Promise((r) => setTimeout(r, 500 + random() * 2500))
      await redis.start()
    },
    stop: () => redis.stop(),
  }
}

async function main(): Promise<number> {
  if (ON_CLUSTER && !configVariables.includes('GATEWAY_REDIS_CLUSTER_NODES')) {
    process.stderr.write(
      "soak: --redis-cluster needs the gateway's Redis Cluster mode (GATEWAY_REDIS_CLUSTER_NODES, issue 28), which this code does not have yet\n",
    )
    return 2
  }
  const redis = await startSoakRedis()
  const runtimes: SimulatedRuntime[] = []
  const replicas: (Replica | null)[] = []
  const viewers: RoamingViewer[] = []
  let emitting = true
  const emitters: Promise<void>[] = []
  try {
    // Every viewer is one operator's: its stream cap and request budget must not be what ends its streams.
    const env = clusterTestEnv(uniquePrefix(), {
      ...redis.env,
      LOG_LEVEL: 'warn',
      GATEWAY_MAX_STREAMS_PER_OPERATOR: String(SESSIONS * VIEWERS * 2),
      GATEWAY_RATE_LIMIT_MAX: '1000000',
    })
    for (let i = 0; i < REPLICAS; i++) replicas.push(null)
    await Promise.all(
      replicas.map(async (_, i) => {
        replicas[i] = await startReplica(i, env)
      }),
    )
    const live = (): Replica[] => replicas.filter((r): r is Replica => r?.alive() === true)
    const admin = await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] }, { expiresIn: '2h' })
    const operator = await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] }, { expiresIn: '2h' })
    for (let s = 0; s < SESSIONS; s++) {
      const rt = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 5000 })
      runtimes.push(rt)
      const res = await request(`${live()[0]?.url}/admin/sessions/soak${s}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ upstream: rt.url, team: 'blue', messagingToken: TOKEN }),
      })
      if (res.status !== 201 && res.status !== 200) throw new Error(`PUT session: ${res.status} ${res.body}`)
    }
    for (const r of live())
      for (let s = 0; s < SESSIONS; s++)
        await waitFor(`replica ${r.index} knows soak${s}`, async () => {
          const got = await request(`${r.url}/admin/sessions/soak${s}`, {
            headers: { authorization: `Bearer ${admin}` },
          })
          return got.status === 200
        })
    const urls = (): string[] => live().map((r) => r.url)
    for (let s = 0; s < SESSIONS; s++)
      for (let v = 0; v < VIEWERS; v++) {
        const viewer = new RoamingViewer(`soak${s}`, operator, urls, v)
        viewers.push(viewer)
        viewer.start()
      }
    const sessionOf = (v: RoamingViewer): number => Number(v.kasmId.slice(4))
    for (const rt of runtimes) rt.emit('log', { level: 'info', msg: 'first' })
    await waitFor('every viewer streaming', () => viewers.every((v) => v.ids.length > 0), 30_000)
    for (const rt of runtimes)
      emitters.push(
        (async () => {
          while (emitting) {
            rt.emit('log', { level: 'info', msg: 'soak' })
            await new Promise((r) => setTimeout(r, EMIT_MS))
          }
        })(),
      )
    // Churning viewers: a fifth of them cut their own connection now and then.
    const churn = setInterval(() => {
      for (const v of viewers) if (random() < 0.05) v.cut()
    }, 500)
    churn.unref()
    // The witness's heap every 2 s (a stopped witness answers nothing: that sample is skipped).
    const witnessHeap: HeapSample[] = []
    const sampler = setInterval(() => {
      const witness = replicas[WITNESS]
      if (witness?.alive())
        void heapUsed(witness.url).then((bytes) => bytes && witnessHeap.push({ at: Date.now(), bytes }))
    }, 2000)
    sampler.unref()

    const recoveries = new Map<FaultKind, number[]>(KINDS.map((k) => [k, []]))
    const failures: string[] = []
    const started = Date.now()
    const restart = async (i: number): Promise<void> => {
      replicas[i] = null
      replicas[i] = await startReplica(i, env)
    }
    while (Date.now() - started < SECONDS * 1000) {
      await new Promise((r) => setTimeout(r, 1000 + random() * 3000))
      const kind = pick(KINDS)
      const restarts = kind === 'sigkill' || kind === 'sigterm'
      const index = restarts ? 1 + Math.floor(random() * (REPLICAS - 1)) : Math.floor(random() * REPLICAS)
      const target = replicas[index]
      const at = Date.now()
      // A new run is the fault's first step: the mark is then the new run's event every viewer must reach.
      if (kind === 'new_run') for (const rt of runtimes) rt.newRun()
      const marks = runtimes.map((rt) => ({
        run: rt.run,
        seq: rt.emit('log', { level: 'info', msg: `fault ${kind}` }).seq,
      }))
      const reached = (v: RoamingViewer): boolean => {
        const mark = marks[sessionOf(v)]
        const last = v.ids.at(-1)
        return mark !== undefined && last !== undefined && runOf(last) === mark.run && seqOf(last) >= mark.seq
      }
      if (kind === 'sigkill' && target) {
        target.child.kill('SIGKILL')
        await target.exited
        await restart(index)
      } else if (kind === 'sigstop' && target) {
        target.child.kill('SIGSTOP')
        await new Promise((r) => setTimeout(r, STOP_MS))
        target.child.kill('SIGCONT')
      } else if (kind === 'sigterm' && target) {
        target.child.kill('SIGTERM')
        const exit = await target.exited
        if (exit.code !== 0) failures.push(`replica ${index} drained with ${JSON.stringify(exit)}`)
        await restart(index)
      } else if (kind === 'redis_empty' || kind === 'redis_failover') {
        await redis.fault()
      } else if (kind === 'cut_runtime') {
        for (const rt of runtimes) rt.dropStreams()
      }
      try {
        await waitFor(`recovery from ${kind}`, () => viewers.every(reached), RECOVERY_LIMIT_MS)
        recoveries.get(kind)?.push(Date.now() - at)
      } catch {
        const behind = viewers.filter((v) => !reached(v))
        failures.push(`${kind}: ${behind.length} viewers not recovered within ${RECOVERY_LIMIT_MS} ms`)
        break
      }
    }
    clearInterval(churn)
    clearInterval(sampler)
    emitting = false
    await Promise.all(emitters)

    // The end: every replica up, then one sentinel per session that every viewer must get.
    for (let i = 0; i < REPLICAS; i++) if (!replicas[i]?.alive()) await restart(i)
    const sentinels = runtimes.map((rt) => `${rt.run}:${rt.emit('sentinel', { end: true }).seq}`)
    const gotSentinel = (v: RoamingViewer): boolean => v.ids.at(-1) === sentinels[sessionOf(v)]
    try {
      await waitFor('every viewer got its sentinel', () => viewers.every(gotSentinel), 60_000)
    } catch {
      failures.push(`${viewers.filter((v) => !gotSentinel(v)).length} viewers missed the sentinel`)
    }
    let frames = 0
    for (const v of viewers) {
      frames += v.ids.length
      const verdict = runVerdict(v.ids, sentinels[sessionOf(v)] ?? '')
      if (verdict !== 'ok') failures.push(`${v.kasmId} viewer (${v.reconnects} reconnects): ${verdict}`)
    }
    const memory = heapVerdict(witnessHeap)
    if (memory.failure !== null) failures.push(memory.failure)
    try {
      await waitFor(
        'one upstream stream per session',
        () => runtimes.every((rt) => rt.openEventStreams === 1),
        20_000,
      )
    } catch {
      failures.push(`upstream streams at rest: ${runtimes.map((rt) => rt.openEventStreams).join(', ')}`)
    }

    const reconnects = viewers.reduce((n, v) => n + v.reconnects, 0)
    process.stdout.write(
      `soak: ${SECONDS} s, seed ${seed}, ${ON_CLUSTER ? 'Redis Cluster' : 'one Redis'}, ${REPLICAS} replicas, ${SESSIONS} sessions, ${viewers.length} viewers, ` +
        `${frames} frames, ${reconnects} viewer reconnects\n\n| fault | count | recovery p50 ms | max ms |\n|---|---|---|---|\n`,
    )
    for (const [kind, times] of recoveries) {
      const sorted = [...times].sort((a, b) => a - b)
      const p50 = sorted[Math.floor(sorted.length / 2)]
      process.stdout.write(`| ${kind} | ${times.length} | ${p50 ?? '-'} | ${sorted.at(-1) ?? '-'} |\n`)
    }
    process.stdout.write(`\nwitness replica heap: ${memory.summary}\n`)
    if (failures.length > 0) {
      process.stdout.write(`\nFAILED:\n${failures.map((f) => `- ${f}`).join('\n')}\n`)
      return 1
    }
    process.stdout.write('\nno event lost, repeated or reordered; every fault recovered\n')
    return 0
  } finally {
    emitting = false
    for (const v of viewers) v.close()
    await stopReplicas(replicas.filter((r): r is Replica => r !== null))
    await Promise.all(runtimes.map((rt) => rt.close()))
    await redis.stop()
  }
}

process.exit(await main())
