/**
 * The event fan-out comparison: the gateway against a raw node:http fan-out of the same bytes (the ceiling),
 * nginx + nchan (what a user would otherwise pick) and nginx proxying every viewer to the runtime (the naive
 * deployment), at 1k and 5k viewers on this machine, in one run. Writes bench/results/events-<date>.md.
 *
 *   npm run bench -- events [--viewers 1000,5000] [--seconds 5] [--rounds 3] [--only raw,gateway,nchan,naive]
 *                           [--full-load 100000] [--profile <dir>] [--out <file>]
 *
 * Every server under test is a separate process; CPU is read from /proc (user + system), memory as RSS
 * (Node servers after a full GC). Only loopback traffic. See bench/README.md for the method.
 */
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { Child } from '../common/ipc.ts'
import { freePort, logger, machine, readFlags, sleep, writeResult } from '../common/orchestrator.ts'
import { cpuOf, rssOf } from '../common/proc.ts'
import { ensureNginx, Nginx, nginxVersion } from './nginx.ts'

interface Options {
  viewers: number[]
  seconds: number
  rounds: number
  only: string[]
  /** Total deliveries per second at full load (events per second = this / viewers). */
  fullLoadDeliveries: number
  /** Where the report goes instead of bench/results/events-<date>.md. */
  out?: string
  /** Where the Node contestants (gateway, raw ceiling) write a `--cpu-prof` profile each when stopped. */
  profileDir?: string
}

/** A server under test, started for one viewer count. */
interface Server {
  port: number
  path: string
  headers: Record<string, string>
  /** Processes whose CPU is the fan-out's cost. */
  cpuPids: number[]
  /** Processes whose memory holds the viewers. */
  memPids: number[]
  gc(): Promise<void>
  /** Connections the runtime serves for this fan-out. */
  upstream(): Promise<string>
  stop(): Promise<void>
}

interface Contestant {
  name: string
  label: string
  start(emitter: Child, emitterPid: number, emitterUrl: string, profileDir?: string): Promise<Server>
}

/** What one contestant accumulates over the rounds of one kind of phase. */
interface Phase {
  seconds: number
  deliveries: number
  expected: number
  cpuS: number
  runtimeCpuS: number
  cpuPer100k: number
  /** CPU-s per 100k of each round (the spread says how noisy the machine was). */
  rounds: number[]
  cpuPercent: number
  p50: number
  p99: number
  max: number
}

interface Row {
  contestant: string
  viewers: number
  connected: number
  upstream: string
  kibPerViewer: number
  steady: Phase
  full: Phase
  fullRate: number
}

/** One contestant while a viewer count is measured: its own runtime, server and viewers. */
interface Entry {
  c: Contestant
  emitter: Child
  emitterPid: number
  emitterUrl: string
  server: Server | null
  client: Child | null
  connected: number
  kibPerViewer: number
  upstream: string
  phases: Record<Kind, Phase>
}

type Kind = 'steady' | 'full'

const log = logger('events')

async function emitterStreams(emitter: Child): Promise<number> {
  return (await emitter.call<{ openEventStreams: number }>('stats')).openEventStreams
}

function nodeServer(name: string, label: string, script: string, path: string, auth: boolean): Contestant {
  return {
    name,
    label,
    async start(emitter, _emitterPid, emitterUrl, profileDir) {
      const child = new Child(
        script,
        { BENCH_UPSTREAM: emitterUrl },
        profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
      )
      const info = await child.call<{ port: number; pid: number; token?: string }>('info')
      const headers: Record<string, string> =
        auth && info.token ? { Authorization: `Bearer ${info.token}` } : {}
      return {
        port: info.port,
        path,
        headers,
        cpuPids: [info.pid],
        memPids: [info.pid],
        gc: async () => void (await child.call('gc')),
        upstream: async () => String(await emitterStreams(emitter)),
        stop: () => child.stop(),
      }
    },
  }
}

function nginxServer(name: string, label: string, mode: 'nchan' | 'naive'): Contestant {
  return {
    name,
    label,
    async start(emitter, emitterPid, emitterUrl) {
      const nginx = new Nginx({
        nchanPort: await freePort(),
        proxyPort: await freePort(),
        upstreamPort: Number(new URL(emitterUrl).port),
      })
      await nginx.start()
      if (mode === 'nchan')
        await emitter.call('publishTo', { url: `http://127.0.0.1:${nginx.nchanPort}/pub` })
      return {
        port: mode === 'nchan' ? nginx.nchanPort : nginx.proxyPort,
        path: mode === 'nchan' ? '/sub' : '/events',
        headers: {},
        // The naive deployment's fan-out happens in the runtime: its CPU is part of the cost.
        cpuPids: mode === 'naive' ? [...nginx.workers(), emitterPid] : nginx.workers(),
        memPids: nginx.workers(),
        gc: async () => {},
        upstream: async () => {
          const streams = await emitterStreams(emitter)
          return mode === 'nchan' ? `${streams} (+1 publisher, a POST per event)` : String(streams)
        },
        stop: async () => {
          if (mode === 'nchan') await emitter.call('publishTo', { url: null })
          await nginx.stop()
          nginx.remove()
        },
      }
    },
  }
}

const contestants: Contestant[] = [
  nodeServer('raw', 'raw node:http (ceiling)', 'events/raw-fanout.ts', '/events', false),
  nodeServer('gateway', 'gateway', 'events/gateway-server.ts', '/desktop/bench/mcp/events', true),
  nginxServer('nchan', 'nginx + nchan', 'nchan'),
  nginxServer('naive', 'nginx proxy to runtime (naive)', 'naive'),
]

function emptyPhase(): Phase {
  return {
    seconds: 0,
    deliveries: 0,
    expected: 0,
    cpuS: 0,
    runtimeCpuS: 0,
    cpuPer100k: Number.NaN,
    rounds: [],
    cpuPercent: Number.NaN,
    p50: Number.NaN,
    p99: Number.NaN,
    max: Number.NaN,
  }
}

interface ClientStats {
  deliveries: number
  p50: number
  p99: number
  max: number
}

/** Starts the contestant's server and viewers; memory is the RSS growth from the first fifth to all. */
async function connect(e: Entry, n: number, profileDir: string | undefined): Promise<void> {
  await e.emitter.call('newRun') // a fresh run: nothing to replay to the new viewers
  const server = await e.c.start(e.emitter, e.emitterPid, e.emitterUrl, profileDir)
  const client = new Child('events/viewers.ts')
  e.server = server
  e.client = client
  const target = { port: server.port, path: server.path, headers: server.headers, batch: 250 }
  // The first fifth warms the server up (code compiled on the first requests is not per-viewer memory).
  const first = Math.max(1, Math.round(n / 5))
  const a = await client.call<{ connected: number }>('connect', { ...target, count: first })
  await sleep(1000)
  await server.gc()
  await sleep(300)
  const rssA = rssOf(server.memPids)
  const b = await client.call<{ connected: number }>('connect', { ...target, count: n - first })
  await sleep(1500)
  await server.gc()
  await sleep(300)
  const rssB = rssOf(server.memPids)
  e.connected = a.connected + b.connected
  e.kibPerViewer = (rssB - rssA) / Math.max(1, b.connected) / 1024
  e.upstream = await server.upstream()
  log(
    `${e.c.name} ${n}: ${e.connected} connected, ${e.kibPerViewer.toFixed(1)} KiB/viewer, upstream ${e.upstream}`,
  )
}

/** One phase of one contestant: its runtime emits for `seconds` while the others are idle. */
async function phase(
  e: Entry,
  kind: Kind,
  n: number,
  perSecond: number,
  burst: number,
  seconds: number,
): Promise<void> {
  const { emitter, emitterPid } = e
  const server = e.server as Server
  const client = e.client as Child
  const stats = (): Promise<ClientStats> => client.call<ClientStats>('stats', { name: kind })
  const before = await emitter.call<{ emitted: number }>('stats')
  const delivered0 = (await stats()).deliveries
  await client.call('record', { name: kind })
  const cpu0 = cpuOf(server.cpuPids)
  const rt0 = cpuOf([emitterPid])
  const t0 = performance.now()
  await emitter.call('rate', { perSecond, burst })
  await sleep(seconds * 1000)
  await emitter.call('rate', { perSecond: 0, burst })
  const after = await emitter.call<{ emitted: number }>('stats')
  const expected = (after.emitted - before.emitted) * n
  // Wait for what is in flight (bounded: a saturated fan-out may never catch up).
  let last = -1
  let now = await stats()
  for (let i = 0; i < 25 && now.deliveries !== last && now.deliveries - delivered0 < expected; i++) {
    last = now.deliveries
    await sleep(200)
    now = await stats()
  }
  await client.call('record', { name: null })
  const cpuS = cpuOf(server.cpuPids) - cpu0
  const delivered = now.deliveries - delivered0
  const p = e.phases[kind]
  p.seconds += (performance.now() - t0) / 1000
  p.deliveries += delivered
  p.expected += expected
  p.cpuS += cpuS
  p.runtimeCpuS += cpuOf([emitterPid]) - rt0
  p.rounds.push(delivered > 0 ? cpuS / (delivered / 100_000) : Number.NaN)
}

async function finish(e: Entry): Promise<void> {
  for (const kind of ['steady', 'full'] as const) {
    const p = e.phases[kind]
    const s = await (e.client as Child).call<ClientStats>('stats', { name: kind })
    p.cpuPer100k = p.deliveries > 0 ? p.cpuS / (p.deliveries / 100_000) : Number.NaN
    p.cpuPercent = (100 * p.cpuS) / Math.max(0.001, p.seconds)
    p.p50 = s.p50
    p.p99 = s.p99
    p.max = s.max
  }
}

async function stop(e: Entry): Promise<void> {
  await e.client?.call('close').catch(() => {})
  await e.client?.stop()
  await e.server?.stop()
  e.client = null
  e.server = null
}

/** Measures every contestant at `n` viewers, interleaving their phases round by round. */
async function measure(entries: Entry[], n: number, o: Options): Promise<Row[]> {
  const fullRate = o.fullLoadDeliveries / n
  try {
    for (const e of entries) {
      e.phases = { steady: emptyPhase(), full: emptyPhase() }
      await connect(e, n, o.profileDir)
    }
    // Rounds interleave the contestants, so a change in the machine's load (other work on this host)
    // spreads over all of them instead of landing on one.
    for (let round = 0; round < o.rounds; round++) {
      const order = entries.map((_, i) => entries[(i + round) % entries.length] as Entry)
      for (const e of order) await phase(e, 'steady', n, 10, 1, o.seconds)
      for (const e of order) await phase(e, 'full', n, fullRate, 5, o.seconds)
      log(`${n} viewers: round ${round + 1}/${o.rounds} done`)
    }
    for (const e of entries) await finish(e)
  } finally {
    for (const e of entries) await stop(e)
  }
  return entries.map((e) => ({
    contestant: e.c.name,
    viewers: n,
    connected: e.connected,
    upstream: e.upstream,
    kibPerViewer: e.kibPerViewer,
    steady: e.phases.steady,
    full: e.phases.full,
    fullRate,
  }))
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    viewers: [1000, 5000],
    seconds: 5,
    rounds: 3,
    only: contestants.map((c) => c.name),
    fullLoadDeliveries: 100_000,
  }
  const flags = readFlags(
    argv,
    ['--viewers', '--seconds', '--rounds', '--only', '--full-load', '--profile', '--out'],
    true,
  )
  for (const [flag, given] of flags) {
    const value = given ?? ''
    if (flag === '--viewers') o.viewers = value.split(',').map(Number)
    else if (flag === '--seconds') o.seconds = Number(value)
    else if (flag === '--rounds') o.rounds = Number(value)
    else if (flag === '--only') o.only = value.split(',')
    else if (flag === '--out') o.out = value
    else if (flag === '--profile') o.profileDir = value
    else o.fullLoadDeliveries = Number(value)
  }
  // Bounded: a full run stays under ten minutes.
  o.viewers = o.viewers.filter((n) => Number.isInteger(n) && n > 0 && n <= 6000)
  o.seconds = Math.min(Math.max(o.seconds, 2), 20)
  o.rounds = Math.min(Math.max(Math.round(o.rounds), 1), 5)
  o.fullLoadDeliveries = Math.min(Math.max(o.fullLoadDeliveries, 1000), 200_000)
  return o
}

const fmt = (v: number, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a')
const ratio = (v: number, base: number | undefined) =>
  base !== undefined && Number.isFinite(v) && Number.isFinite(base) && base > 0
    ? ` (${(v / base).toFixed(2)}x)`
    : ''

function table(rows: Row[], labels: Map<string, string>): string {
  const out: string[] = []
  for (const n of [...new Set(rows.map((r) => r.viewers))]) {
    const group = rows.filter((r) => r.viewers === n)
    const raw = group.find((r) => r.contestant === 'raw')
    const fullRate = group[0]?.fullRate ?? 0
    out.push(`### ${n} viewers`, '')
    out.push(
      `| fan-out | upstream connections | KiB per idle viewer | 10 ev/s: CPU-s per 100k | CPU % | p50 ms | p99 ms | ${fmt(fullRate, 0)} ev/s in bursts of 5: CPU-s per 100k | p50 ms | p99 ms | delivered |`,
      '|---|---|---|---|---|---|---|---|---|---|---|',
    )
    for (const r of group) {
      const s = r.steady
      const f = r.full
      out.push(
        `| ${labels.get(r.contestant)} | ${r.upstream} | ${fmt(r.kibPerViewer, 1)}${ratio(r.kibPerViewer, raw?.kibPerViewer)} | ` +
          `${fmt(s.cpuPer100k)}${ratio(s.cpuPer100k, raw?.steady.cpuPer100k)} | ${fmt(s.cpuPercent, 0)} | ` +
          `${fmt(s.p50)}${ratio(s.p50, raw?.steady.p50)} | ${fmt(s.p99)}${ratio(s.p99, raw?.steady.p99)} | ` +
          `${fmt(f.cpuPer100k)}${ratio(f.cpuPer100k, raw?.full.cpuPer100k)} | ` +
          `${fmt(f.p50)}${ratio(f.p50, raw?.full.p50)} | ${fmt(f.p99)}${ratio(f.p99, raw?.full.p99)} | ` +
          `${fmt((100 * (s.deliveries + f.deliveries)) / Math.max(1, s.expected + f.expected), 1)}% |`,
      )
    }
    out.push('')
  }
  return out.join('\n')
}

export async function main(argv: string[]): Promise<void> {
  const o = parseOptions(argv)
  const withNginx = ensureNginx(log)
  const chosen = contestants.filter(
    (c) => o.only.includes(c.name) && (withNginx || (c.name !== 'nchan' && c.name !== 'naive')),
  )
  if (!withNginx) {
    log(
      'nginx with nchan is not installed (apt-get install nginx libnginx-mod-nchan): skipping nchan and naive',
    )
  }
  const started = Date.now()
  // One runtime per contestant, so a phase's events reach only the fan-out being measured.
  const entries: Entry[] = []
  const rows: Row[] = []
  try {
    for (const c of chosen) {
      const emitter = new Child('common/emitter.ts')
      const info = await emitter.call<{ url: string; pid: number }>('info')
      entries.push({
        c,
        emitter,
        emitterPid: info.pid,
        emitterUrl: info.url,
        server: null,
        client: null,
        connected: 0,
        kibPerViewer: Number.NaN,
        upstream: '',
        phases: { steady: emptyPhase(), full: emptyPhase() },
      })
    }
    for (const n of o.viewers) rows.push(...(await measure(entries, n, o)))
  } finally {
    for (const e of entries) await e.emitter.stop()
  }
  const labels = new Map(contestants.map((c) => [c.name, c.label]))
  const date = new Date().toISOString().slice(0, 10)
  const command = `npm run bench -- events ${argv.join(' ')}`.trim()
  const report = [
    `# Event fan-out benchmark, ${new Date().toISOString()}`,
    '',
    `Command: \`${command}\` (${((Date.now() - started) / 1000).toFixed(0)} s).`,
    `Machine: ${machine()}, load average before the run ${loadavg()[0]?.toFixed(2)}; Node ${process.version}; ${withNginx ? nginxVersion() : 'no nginx'}.`,
    '',
    `Each contestant has its own runtime, server and viewers, all connected at once; phases of ${o.seconds} s run one contestant at a time, interleaved over ${o.rounds} rounds (figures are totals over the rounds).`,
    `"10 ev/s" emits one event every 100 ms; full load emits ${o.fullLoadDeliveries / 1000}k deliveries/s in bursts of 5 events.`,
    'CPU is user + system seconds of the fan-out process(es) per 100k delivered events (the naive deployment includes the runtime, which does its fan-out);',
    'memory is the RSS growth of those processes from a fifth of the viewers to all of them, per viewer (Node after a full GC; kernel socket buffers are in no RSS);',
    'delay is from the runtime writing an event to the viewer reading it. Ratios are to the raw node:http ceiling of the same run.',
    'Nagle is off everywhere: TCP_NODELAY on the Node servers and clients, `tcp_nodelay on` in nginx; nginx runs one worker, like the single-threaded Node servers.',
    '',
    table(rows, labels),
    '<details><summary>raw numbers</summary>',
    '',
    '```json',
    JSON.stringify(rows, null, 1),
    '```',
    '</details>',
    '',
  ].join('\n')
  const file = o.out ?? writeResult('events', date, report)
  if (o.out !== undefined) writeFileSync(o.out, report)
  process.stdout.write(`\n${table(rows, labels)}\nwritten to ${file}\n`)
}
