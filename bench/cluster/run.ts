/**
 * Cluster benchmark (issue 28): 3 gateway replicas (`node dist/server.js`, as production runs) on one
 * redis-server or, with `--redis-cluster`, on a Redis Cluster of 3 masters + 3 replicas; 50 / 500 / 2,000
 * sessions at 1 event per second each, viewers spread over sessions and replicas, and every replica with one
 * overview stream that watches every session (as a support team's consoles do). Per event it reports replica
 * CPU, Redis CPU, Redis commands, p50/p99 delivery delay and memory per watched session, and marks the
 * targets (ratios to the smallest session count of the same run) pass or FAIL. bench/README.md has the method.
 *
 *   npm run bench -- cluster [--sessions 50,500,2000] [--seconds 30] [--redis-cluster] [--out file]
 *   npm run bench -- cluster --sessions 50,200 --seconds 10        # quick
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { configVariables } from '../../src/config.ts'
import { startRedisCluster } from '../../test/cluster/redis-cluster-harness.ts'
import { ensureBuilt } from '../common/build.ts'
import { benchBearer, type GatewayProcess, startGateway } from '../common/gateway-process.ts'
import { Child } from '../common/ipc.ts'
import { logger, machine, sleep, writeResult } from '../common/orchestrator.ts'
import { cpuOf, rssBytes, type Scheduled, scheduledOf } from '../common/proc.ts'
import { commandDelta, commandStats, commandsProcessed, startRedis } from '../common/redis.ts'
import { type ClusterBenchOptions, parseClusterOptions } from './options.ts'
import { RuntimePool } from './runtime-pool.ts'
import { perEvent, type Scenario, tables } from './verdicts.ts'

const log = logger('cluster')

/** The Redis the replicas share, whichever kind. */
interface BenchStore {
  readonly kind: string
  /** What the replicas get: REDIS_URL, and GATEWAY_REDIS_CLUSTER_NODES for a cluster. */
  readonly redisUrl: string
  readonly env: Record<string, string>
  pids(): number[]
  /** total_commands_processed and commandstats, summed over the masters. */
  commands(): Promise<{ total: number; perCommand: Record<string, number> }>
  flush(): Promise<void>
  stop(): Promise<void>
}

async function singleRedis(): Promise<BenchStore> {
  const redis = await startRedis()
  return {
    kind: 'one redis-server',
    redisUrl: redis.url,
    env: {},
    pids: () => [redis.pid],
    commands: async () => ({
      total: await commandsProcessed(redis.client),
      perCommand: await commandStats(redis.client),
    }),
    flush: async () => void (await redis.client.flushall()),
    stop: () => redis.stop(),
  }
}

async function clusterRedis(): Promise<BenchStore> {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 })
  const masters = async () => (await cluster.masters()).map((m) => cluster.node(m.port))
  return {
    kind: 'Redis Cluster, 3 masters + 3 replicas',
    redisUrl: `redis://${cluster.nodes.split(',')[0]}`,
    env: { GATEWAY_REDIS_CLUSTER_NODES: cluster.nodes },
    pids: () => cluster.pids(),
    commands: async () => {
      let total = 0
      const perCommand: Record<string, number> = {}
      for (const node of await masters()) {
        total += await commandsProcessed(node)
        for (const [name, calls] of Object.entries(await commandStats(node)))
          perCommand[name] = (perCommand[name] ?? 0) + calls
      }
      return { total, perCommand }
    },
    flush: async () => {
      for (const node of await masters()) await node.flushall()
    },
    stop: () => cluster.stop(),
  }
}

/** Waits (bounded) for the 1-minute load average to fall below `calmLoad`; says what it was. */
/** The reader leases a replica holds now (`krg_cluster_leases_held` of its /metrics). */
/** The mean wait on a run queue, in µs, each time a process was run between two readings (NaN: never run). */
function waitPerRun(before: Scheduled, after: Scheduled): number {
  const runs = after.runs - before.runs
  return runs > 0 ? (1e6 * (after.waitS - before.waitS)) / runs : Number.NaN
}

async function leasesHeld(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text()
  return Number(/^krg_cluster_leases_held (\d+)/m.exec(text)?.[1] ?? Number.NaN)
}

async function waitForCalm(
  opts: ClusterBenchOptions,
): Promise<{ load: number; calm: boolean; waitedS: number }> {
  const started = Date.now()
  for (;;) {
    const load = loadavg()[0] ?? 0
    const waitedS = (Date.now() - started) / 1000
    if (load < opts.calmLoad) return { load, calm: true, waitedS }
    if (waitedS >= opts.calmWaitS) {
      log(`load average ${load.toFixed(2)} after ${waitedS.toFixed(0)} s: measuring anyway`)
      return { load, calm: false, waitedS }
    }
    if (Math.round(waitedS) % 30 === 0) log(`waiting for a calm machine: load average ${load.toFixed(2)}`)
    await sleep(5000)
  }
}

/** Polls `check` every 200 ms for at most `seconds`; false when it never held. */
async function within(seconds: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000
  while (Date.now() < deadline) {
    if (await check()) return true
    await sleep(200)
  }
  return false
}

async function scenario(opts: ClusterBenchOptions, sessions: number, store: BenchStore): Promise<Scenario> {
  const runtimeCount = Math.min(sessions, opts.runtimes)
  const runtimes = new RuntimePool(runtimeCount, opts.runtimeProcesses)
  const replicas: GatewayProcess[] = []
  const viewers = new Child('cluster/viewers.ts')
  try {
    const urls = await runtimes.urls()
    const runtimeOf = (s: number) => s % runtimeCount
    const sessionMap = new Map(
      Array.from({ length: sessions }, (_, s) => [`bench-${s}`, urls[runtimeOf(s)] as string]),
    )
    const prefix = `krgbench:cluster:${sessions}:${Date.now()}:`
    replicas.push(
      ...(await Promise.all(
        Array.from({ length: opts.replicas }, () =>
          startGateway({
            upstream: urls[0] as string,
            sessions: sessionMap,
            redisUrl: store.redisUrl,
            redisPrefix: prefix,
            env: { ...store.env, GATEWAY_MAX_STREAMS_PER_OPERATOR: '100000' },
            nodeArgs: opts.nodeArgs,
          }),
        ),
      )),
    )
    const token = await benchBearer()
    const ports = replicas.map((r) => Number(new URL(r.origin).port))
    await sleep(1000)
    const rssBoot = replicas.map((r) => rssBytes(r.pid))

    // Every replica's overview watches every session; that makes the replicas read every session's stream.
    for (const port of ports) await viewers.call('overview', { port, token })
    const streams = async () => (await runtimes.stats()).streams.reduce((a, b) => a + b, 0)
    const overviews = () => viewers.call<{ frames: number; status: string }[]>('overviews')
    const watching = await within(120, async () => {
      const o = await overviews()
      return (await streams()) === sessions && o.every((x) => x.frames >= sessions)
    })
    if (!watching)
      log(
        `not every session watched after 120 s: ${await streams()} upstream streams, overviews ${JSON.stringify(await overviews())}`,
      )
    await sleep(2000)
    const rssWatched = replicas.map((r) => rssBytes(r.pid))
    const memKiBPerWatchedSession =
      rssWatched.reduce((sum, rss, i) => sum + (rss - (rssBoot[i] as number)) / sessions, 0) /
      replicas.length /
      1024

    // Viewer k of session s on replica (s + k) mod replicas: every replica serves every kind of session.
    const viewerCount: number[] = new Array(sessions).fill(0)
    const connects: { port: number; path: string }[] = []
    for (let s = 0; s < sessions; s++) {
      for (let k = 0; k < opts.viewersPerSession; k++) {
        connects.push({
          port: ports[(s + k) % ports.length] as number,
          path: `/desktop/bench-${s}/mcp/events`,
        })
      }
    }
    let connected = 0
    for (let i = 0; i < connects.length; i += 100) {
      const batch = connects.slice(i, i + 100)
      const got = await Promise.all(
        batch.map((c) =>
          viewers.call<{ connected: number }>('connect', {
            ...c,
            headers: { Authorization: `Bearer ${token}` },
            count: 1,
            batch: 1,
          }),
        ),
      )
      got.forEach((g, j) => {
        connected += g.connected
        const s = Number((batch[j] as { path: string }).path.split('/')[2]?.slice('bench-'.length))
        viewerCount[s] = (viewerCount[s] ?? 0) + g.connected
      })
    }
    log(
      `${sessions} sessions: ${connected} viewers and ${ports.length} overviews on ${ports.length} replicas`,
    )

    // Warm-up at the measured rate (code compiled on the first events is not measured), then drained.
    await runtimes.rate(opts.rate)
    await sleep(3000)
    await runtimes.rate(0)
    await sleep(1500)

    // Idle: everything connected and watched, no event written.
    const pids = replicas.map((r) => r.pid)
    const idleS = Math.min(10, opts.seconds)
    const idleCpu0 = cpuOf(pids)
    const idleRedis0 = cpuOf(store.pids())
    const idleCmds0 = (await store.commands()).total
    const idleAt = performance.now()
    await sleep(idleS * 1000)
    const idleWall = (performance.now() - idleAt) / 1000
    const idle = {
      replicaCpuPerS: (cpuOf(pids) - idleCpu0) / idleWall,
      redisCpuPerS: (cpuOf(store.pids()) - idleRedis0) / idleWall,
      redisCommandsPerS: ((await store.commands()).total - idleCmds0) / idleWall,
    }

    await viewers.call('reset')
    const loadBefore = loadavg()[0] ?? 0
    const phaseAt = performance.now()
    const cpu0 = cpuOf(pids)
    const benchPids = [...runtimes.pids, viewers.pid]
    const benchCpu0 = cpuOf(benchPids)
    const redisCpu0 = cpuOf(store.pids())
    const scheduled0 = {
      replicas: scheduledOf(pids),
      redis: scheduledOf(store.pids()),
      bench: scheduledOf(benchPids),
    }
    const phaseFrom = Date.now()
    const cmds0 = await store.commands()
    const frames0 = (await overviews()).reduce((n, o) => n + o.frames, 0)
    const emitted0 = (await runtimes.stats()).emitted
    await runtimes.rate(opts.rate)
    await sleep(opts.seconds * 1000)
    await runtimes.rate(0)
    const after = await runtimes.stats()
    const emitted = after.emitted.map((n, j) => n - (emitted0[j] ?? 0))
    let expected = 0
    let sessionEvents = 0
    for (let s = 0; s < sessions; s++) {
      const events = emitted[runtimeOf(s)] ?? 0
      sessionEvents += events
      expected += events * (viewerCount[s] ?? 0)
    }
    let stats = await viewers.call<{
      deliveries: number
      p50: number
      p99: number
      max: number
      p99ByPort: Record<string, number>
    }>('stats')
    for (let i = 0, last = -1; i < 50 && stats.deliveries < expected && stats.deliveries !== last; i++) {
      last = stats.deliveries
      await sleep(200)
      stats = await viewers.call('stats')
    }
    const replicaCpuS = cpuOf(pids) - cpu0
    const phaseS = (performance.now() - phaseAt) / 1000
    const phaseTo = Date.now()
    const runQueueWait = {
      replicas: waitPerRun(scheduled0.replicas, scheduledOf(pids)),
      redis: waitPerRun(scheduled0.redis, scheduledOf(store.pids())),
      bench: waitPerRun(scheduled0.bench, scheduledOf(benchPids)),
    }
    const benchCpuS = cpuOf(benchPids) - benchCpu0
    const redisCpuS = cpuOf(store.pids()) - redisCpu0
    const cmds1 = await store.commands()
    const frames1 = (await overviews()).reduce((n, o) => n + o.frames, 0)
    const leases = await Promise.all(replicas.map((r) => leasesHeld(r.origin)))
    const result: Scenario = {
      sessions,
      replicas: replicas.length,
      viewers: connected,
      upstreamStreams: after.streams.reduce((a, b) => a + b, 0),
      sessionEvents,
      expected,
      delivered: stats.deliveries,
      p50Ms: stats.p50,
      p99Ms: stats.p99,
      maxMs: stats.max,
      overviewFrames: frames1 - frames0,
      phaseS,
      replicaCpuS,
      redisCpuS,
      redisCommands: cmds1.total - cmds0.total,
      idle,
      memKiBPerWatchedSession,
      benchCpuS,
      runQueueWait,
      phase: { from: phaseFrom, to: phaseTo },
      loadBefore,
      loadAfter: loadavg()[0] ?? 0,
      perCommand: commandDelta(cmds0.perCommand, cmds1.perCommand),
      byReplica: ports.map((port, i) => ({
        leases: leases[i] as number,
        p99Ms: stats.p99ByPort[port] ?? Number.NaN,
      })),
    }
    const e = perEvent(result)
    log(
      `${sessions} sessions: ${result.delivered}/${result.expected} delivered, p50 ${result.p50Ms.toFixed(1)} p99 ${result.p99Ms.toFixed(1)} ms, replica ${e.replicaCpuUsPerDelivery.toFixed(1)} µs/delivery, Redis ${e.redisCpuUsPerEvent.toFixed(1)} µs and ${e.redisCommandsPerEvent.toFixed(2)} commands per event, ${memKiBPerWatchedSession.toFixed(1)} KiB per watched session`,
    )
    return result
  } finally {
    await viewers.call('close').catch(() => {})
    await viewers.stop()
    await Promise.all(replicas.map((r) => r.stop()))
    await runtimes.stop()
    await store.flush().catch(() => {})
  }
}

function report(
  opts: ClusterBenchOptions,
  argv: readonly string[],
  store: BenchStore,
  calm: { load: number; calm: boolean; waitedS: number }[],
  results: Scenario[],
  seconds: number,
): string {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  const dirty = execFileSync('git', ['status', '--porcelain', 'src'], { encoding: 'utf8' }).trim() !== ''
  return [
    `# Cluster benchmark, ${new Date().toISOString()}`,
    '',
    `Command: \`npm run bench -- cluster ${argv.join(' ')}\` (${seconds.toFixed(0)} s), gateway code at \`${commit}\`${dirty ? ' with uncommitted changes in src/' : ''}, run from dist/.`,
    `Machine: ${machine()}; Node ${process.version}; shared with other work. Load average (1 min) before each scenario: ${calm.map((c) => `${c.load.toFixed(2)}${c.calm ? '' : ` (not below ${opts.calmLoad} after ${c.waitedS.toFixed(0)} s)`}`).join(', ')}.`,
    `Redis: ${store.kind}. ${opts.replicas} replicas; ${opts.rate} event/s per session from at most ${opts.runtimes} simulated runtimes in ${opts.runtimeProcesses} processes (the events of N sessions arrive in ${opts.runtimes} groups a second, N / ${opts.runtimes} each) for ${opts.seconds} s; ${opts.viewersPerSession} viewers per session on different replicas; one overview stream per replica watching every session.`,
    '',
    'Per event: CPU is user + system of the replicas (or of every Redis process) over the phase, less what they spend idle (measured over 10 s with everything connected and watched, no event written, and shown as a share of one core); "per delivery" divides by viewer deliveries, "per event" by session events (an event written by a runtime for one session). Redis commands: INFO total_commands_processed of the masters (scripts count their inner commands), less the idle rate. Delay: the runtime writing an event to a viewer reading it. Memory: replica RSS growth from boot to watching every session (overview and upstream readers open, before any viewer), per session, mean of the replicas. Targets: ratios to the smallest session count of this run.',
    '',
    ...tables(results),
    '',
    '<details><summary>raw numbers</summary>',
    '',
    '```json',
    JSON.stringify(results, null, 1),
    '```',
    '</details>',
    '',
  ].join('\n')
}

export async function main(argv: string[]): Promise<void> {
  const opts = parseClusterOptions(argv)
  if (opts.redisCluster && !configVariables.includes('GATEWAY_REDIS_CLUSTER_NODES')) {
    process.stderr.write(
      "bench cluster: --redis-cluster needs the gateway's Redis Cluster mode (GATEWAY_REDIS_CLUSTER_NODES, issue 28), which this code does not have yet\n",
    )
    process.exitCode = 2
    return
  }
  ensureBuilt(log)
  const started = Date.now()
  const store = opts.redisCluster ? await clusterRedis() : await singleRedis()
  const results: Scenario[] = []
  const calm: { load: number; calm: boolean; waitedS: number }[] = []
  // Interrupted, it still stops what it started (the replicas and Redis are not IPC children).
  const onSignal = () => void store.stop().finally(() => process.exit(130))
  process.once('SIGINT', onSignal)
  try {
    for (const sessions of opts.sessions) {
      calm.push(await waitForCalm(opts))
      results.push(await scenario(opts, sessions, store))
    }
  } finally {
    process.off('SIGINT', onSignal)
    await store.stop()
  }
  const out = report(opts, argv, store, calm, results, (Date.now() - started) / 1000)
  if (opts.out !== undefined) {
    writeFileSync(opts.out, out)
    log(`wrote ${opts.out}`)
  } else log(`wrote ${writeResult('cluster', new Date().toISOString().slice(0, 10), out)}`)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2))
