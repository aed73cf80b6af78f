/**
 * Cluster fan-out benchmark: two gateway replicas on one Redis against one embedded gateway (memory bus), in
 * the same run, with one session and with 50 sessions. Writes bench/results/cluster-<date>.md.
 *
 *   node --import tsx bench/cluster/run.ts [--viewers 2000] [--seconds 10] [--rate 10]
 *
 * `--viewers` is per replica (the embedded gateway gets the same number: the per-process cost compares
 * directly); `--rate` is events per second per session, all sessions fed by one simulated runtime. Reports
 * delivered/expected, p50/p99 delay from the runtime's write to the viewer's read, Redis commands per event
 * read from a runtime (INFO total_commands_processed), and CPU per delivered event of the gateways (and of
 * redis-server). Shares its emitter, gateway setup, viewers and helpers with the events bench (bench/common).
 */
import { fileURLToPath } from 'node:url'
import { Child } from '../common/ipc.ts'
import { logger, machine, readFlags, sleep, writeResult } from '../common/orchestrator.ts'
import { cpuOf } from '../common/proc.ts'
import {
  type BenchRedis,
  commandDelta,
  commandStats,
  commandsProcessed,
  startRedis,
} from '../common/redis.ts'

interface Options {
  viewers: number
  seconds: number
  rate: number
  /** Session counts to run (default 1 and 50). */
  sessions: number[]
  /** Buses to run (default embedded and cluster). */
  modes: ('embedded' | 'cluster')[]
}

interface Result {
  mode: 'embedded' | 'cluster'
  sessions: number
  replicas: number
  viewers: number
  connected: number
  upstreamStreams: number
  events: number
  expected: number
  delivered: number
  p50: number
  p99: number
  max: number
  gatewayCpuS: number
  /** The one process that reads every viewer socket (it shares the machine with the servers). */
  viewersCpuS: number
  redisCpuS: number
  redisCommands: number
  cpuUsPerDelivery: number
  redisOpsPerEvent: number
  /** Hot-path commands the replicas send (EVALSHA appends, XREADs, replay reads) per event. */
  roundTripsPerEvent: number
  perCommand: Record<string, number>
}

const log = logger('cluster')

function parse(argv: string[]): Options {
  const opts: Options = {
    viewers: 2000,
    seconds: 10,
    rate: 10,
    sessions: [1, 50],
    modes: ['embedded', 'cluster'],
  }
  const flags = readFlags(argv, ['--sessions', '--modes', '--viewers', '--seconds', '--rate'], true)
  for (const [flag, given] of flags) {
    const value = Number(given)
    if (flag === '--sessions') opts.sessions = String(given).split(',').map(Number)
    else if (flag === '--modes') opts.modes = String(given).split(',') as Options['modes']
    else if (flag === '--viewers') opts.viewers = value
    else if (flag === '--seconds') opts.seconds = value
    else opts.rate = value
  }
  return opts
}

/** Commands a client sends (round trips, pipelined or not), as opposed to those a script runs inside Redis. */
const CLIENT_SENT = new Set(['evalsha', 'eval', 'xread', 'xrange', 'client|unblock', 'client', 'ping'])

async function scenario(
  opts: Options,
  mode: 'embedded' | 'cluster',
  sessions: number,
  emitter: Child,
  emitterUrl: string,
  redis: BenchRedis | null,
): Promise<Result> {
  const replicas = mode === 'cluster' ? 2 : 1
  const prefix = `krgbench:${mode}:${sessions}:${Date.now()}:`
  const gateways: Child[] = []
  for (let i = 0; i < replicas; i++) {
    gateways.push(
      new Child('cluster/gateway-replica.ts', {
        BENCH_UPSTREAM: emitterUrl,
        BENCH_SESSIONS: String(sessions),
        BENCH_REGISTER: i === 0 ? '1' : '0',
        BENCH_PREFIX: prefix,
        ...(redis ? { BENCH_REDIS_URL: redis.url } : {}),
      }),
    )
  }
  const infos = await Promise.all(
    gateways.map((g) => g.call<{ port: number; pid: number; token: string }>('info')),
  )
  for (const g of gateways) {
    for (let i = 0; i < 100 && (await g.call<number>('known')) < sessions; i++) await sleep(50)
  }
  const viewers = new Child('cluster/viewers.ts')
  let connected = 0
  for (const [r, info] of infos.entries()) {
    for (let s = 0; s < sessions; s++) {
      // Spread a replica's viewers over the sessions; rotate the remainder so every session has viewers.
      const count = Math.floor(opts.viewers / sessions) + (s < opts.viewers % sessions ? 1 : 0)
      if (count === 0) continue
      const res = await viewers.call<{ connected: number }>('connect', {
        port: info.port,
        path: `/desktop/bench-${(s + r) % sessions}/mcp/events`,
        headers: { Authorization: `Bearer ${info.token}` },
        count,
        batch: 100,
      })
      connected += res.connected
    }
  }
  log(`${mode} ${sessions} session(s): ${connected} viewers on ${replicas} replica(s)`)
  await sleep(1500)

  await viewers.call('reset')
  const pids = infos.map((i) => i.pid)
  const cpu0 = cpuOf(pids)
  const viewersCpu0 = cpuOf([viewers.pid])
  const redisCpu0 = redis ? cpuOf([redis.pid]) : 0
  const cmds0 = redis ? await commandsProcessed(redis.client) : 0
  const stats0 = redis ? await commandStats(redis.client) : {}
  const before = await emitter.call<{ emitted: number }>('stats')
  await emitter.call('rate', { perSecond: opts.rate, burst: 1 })
  await sleep(opts.seconds * 1000)
  await emitter.call('rate', { perSecond: 0, burst: 1 })
  const after = await emitter.call<{ emitted: number; openEventStreams: number }>('stats')
  const events = after.emitted - before.emitted
  const expected = events * connected
  let stats = await viewers.call<{ deliveries: number; p50: number; p99: number; max: number }>('stats')
  for (let i = 0, last = -1; i < 30 && stats.deliveries < expected && stats.deliveries !== last; i++) {
    last = stats.deliveries
    await sleep(200)
    stats = await viewers.call('stats')
  }
  const gatewayCpuS = cpuOf(pids) - cpu0
  const viewersCpuS = cpuOf([viewers.pid]) - viewersCpu0
  const redisCpuS = redis ? cpuOf([redis.pid]) - redisCpu0 : 0
  const redisCommands = redis ? (await commandsProcessed(redis.client)) - cmds0 : 0
  const stats1 = redis ? await commandStats(redis.client) : {}
  const perCommand = commandDelta(stats0, stats1)
  const sent = Object.entries(perCommand)
    .filter(([name]) => CLIENT_SENT.has(name))
    .reduce((n, [, calls]) => n + calls, 0)
  const result: Result = {
    mode,
    sessions,
    replicas,
    viewers: opts.viewers * replicas,
    connected,
    upstreamStreams: after.openEventStreams,
    events,
    expected,
    delivered: stats.deliveries,
    p50: stats.p50,
    p99: stats.p99,
    max: stats.max,
    gatewayCpuS,
    viewersCpuS,
    redisCpuS,
    redisCommands,
    cpuUsPerDelivery: stats.deliveries > 0 ? (gatewayCpuS * 1e6) / stats.deliveries : Number.NaN,
    // Each event the runtime wrote is read once per session (one reader each), then fanned out.
    redisOpsPerEvent: events > 0 ? redisCommands / (events * sessions) : Number.NaN,
    roundTripsPerEvent: events > 0 ? sent / (events * sessions) : Number.NaN,
    perCommand,
  }
  await viewers.call('close')
  await viewers.stop()
  for (const g of gateways) await g.stop()
  await sleep(500)
  return result
}

const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-')

function report(opts: Options, results: Result[], seconds: number, argv: string[]): string {
  const lines = [
    `# Cluster fan-out benchmark, ${new Date().toISOString()}`,
    '',
    `Command: \`node --import tsx bench/cluster/run.ts ${argv.join(' ')}\` (${seconds.toFixed(0)} s).`,
    `Machine: ${machine()}; Node ${process.version}; shared with other work while it ran.`,
    '',
    `${opts.viewers} viewers per gateway process; ${opts.rate} events/s per session for ${opts.seconds} s, one simulated runtime feeding every session.`,
    'Delay: from the runtime writing an event to a viewer reading it (all processes on one machine).',
    'CPU: user + system of the gateway processes (and of redis-server) per delivered event.',
    'Redis commands per event: INFO total_commands_processed over the phase / (events x sessions), i.e. per event read from a runtime, all replicas included; it counts the commands the append script runs inside Redis. Round trips per event: the EVALSHA appends and XREADs (and replay reads) the replicas send, per event.',
    '',
    '| bus | sessions | replicas | viewers | upstream streams | delivered / expected | p50 ms | p99 ms | max ms | gateway CPU µs per delivery | redis CPU s | Redis commands per event | round trips per event |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const r of results) {
    lines.push(
      `| ${r.mode} | ${r.sessions} | ${r.replicas} | ${r.connected} | ${r.upstreamStreams} | ${r.delivered} / ${r.expected} (${fmt((100 * r.delivered) / r.expected, 2)}%) | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max, 0)} | ${fmt(r.cpuUsPerDelivery)} | ${fmt(r.redisCpuS)} | ${r.mode === 'cluster' ? fmt(r.redisOpsPerEvent) : '-'} | ${r.mode === 'cluster' ? fmt(r.roundTripsPerEvent) : '-'} |`,
    )
  }
  lines.push(
    '',
    '<details><summary>raw numbers</summary>',
    '',
    '```json',
    JSON.stringify(results, null, 1),
    '```',
    '</details>',
    '',
  )
  return lines.join('\n')
}

export async function main(argv: string[]): Promise<void> {
  const opts = parse(argv)
  const started = Date.now()
  const redis = await startRedis()
  const emitter = new Child('common/emitter.ts')
  const { url } = await emitter.call<{ url: string }>('info')
  const results: Result[] = []
  try {
    for (const sessions of opts.sessions) {
      for (const mode of opts.modes) {
        results.push(await scenario(opts, mode, sessions, emitter, url, mode === 'cluster' ? redis : null))
        const x = results.at(-1) as Result
        log(
          `${x.mode} ${x.sessions}: ${x.delivered}/${x.expected} p50 ${fmt(x.p50)} p99 ${fmt(x.p99)} ms, ${fmt(x.cpuUsPerDelivery)} µs/delivery, ${fmt(x.redisOpsPerEvent)} cmds/event, ${fmt(x.roundTripsPerEvent)} round trips/event, CPU s gateways ${fmt(x.gatewayCpuS)} viewers ${fmt(x.viewersCpuS)} redis ${fmt(x.redisCpuS)}`,
        )
      }
    }
  } finally {
    await emitter.stop()
    await redis.stop()
  }
  const out = report(opts, results, (Date.now() - started) / 1000, argv)
  const file = writeResult('cluster', new Date().toISOString().slice(0, 10), out)
  log(`wrote ${file}`)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2))
