/**
 * Proxy benchmark: the request path of the gateway against the runtime reached directly, a bare Fastify +
 * @fastify/reply-from proxy that only injects the token, and nginx (proxy_pass + proxy_set_header), in one run.
 * The gateway runs as production does (`node dist/server.js`, built first), embedded and on Redis, each with a
 * bearer (HS256) and with a cookie session. Writes bench/results/proxy-<date>.md.
 *
 *   npm run bench -- proxy [--seconds 5] [--connections 16] [--rate 200] [--only direct,bare,nginx,embedded,redis]
 *                          [--routes inbox,messages,artifact,attachment] [--profile <dir>] [--quick] [--out <file>]
 *
 * Per route and contestant: closed-loop throughput with `--connections` requests in flight, the server's CPU
 * per request (user + system from /proc/<pid>/stat over that phase), Redis commands per request (INFO
 * commandstats, commands run inside scripts included) and, at a fixed `--rate`, p50/p99 latency and the
 * commands the gateway sends Redis per request (MONITOR: script-internal commands excluded).
 */
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import type { Redis } from 'ioredis'
import { TOKEN_HEADER } from '../../src/upstream/agent.ts'
import { ensureBuilt } from '../common/build.ts'
import { benchBearer, benchCookie, type GatewayProcess, startGateway } from '../common/gateway-process.ts'
import { Child } from '../common/ipc.ts'
import { NginxServer } from '../common/nginx.ts'
import { freePort, logger, machine, readFlags, writeResult } from '../common/orchestrator.ts'
import { cpuOf } from '../common/proc.ts'
import { type BenchRedis, commandDelta, commandStats, readsProcessed, startRedis } from '../common/redis.ts'
import { closedLoop, fixedRate, type MakeShot, quantile } from './load.ts'

const log = logger('proxy')
const ROUTES = ['inbox', 'messages', 'artifact', 'attachment'] as const
type RouteName = (typeof ROUTES)[number]
const GROUPS = ['direct', 'bare', 'nginx', 'embedded', 'redis'] as const
type Group = (typeof GROUPS)[number]

interface Options {
  seconds: number
  warmupSeconds: number
  connections: number
  rate: number
  groups: Group[]
  routes: RouteName[]
  attachmentRate: number
  rounds: number
  profileDir?: string
  out?: string
  /** Run the gateway from source through tsx instead of building dist/ (the smoke test). */
  tsx: boolean
}

function parse(argv: string[]): Options {
  const quick = argv.includes('--quick')
  const tsx = argv.includes('--tsx')
  const rest = argv.filter((a) => a !== '--quick' && a !== '--tsx')
  const opts: Options = {
    seconds: quick ? 1 : 5,
    warmupSeconds: quick ? 0.3 : 2,
    connections: 16,
    rate: 200,
    attachmentRate: 10,
    rounds: quick ? 1 : 3,
    groups: [...GROUPS],
    routes: [...ROUTES],
    tsx,
  }
  const flags = readFlags(
    rest,
    [
      '--seconds',
      '--connections',
      '--rate',
      '--attachment-rate',
      '--rounds',
      '--only',
      '--routes',
      '--profile',
      '--out',
    ],
    true,
  )
  for (const [flag, given] of flags) {
    if (given === undefined) throw new Error(`${flag} needs a value`)
    if (flag === '--seconds') opts.seconds = Number(given)
    else if (flag === '--connections') opts.connections = Number(given)
    else if (flag === '--rate') opts.rate = Number(given)
    else if (flag === '--attachment-rate') opts.attachmentRate = Number(given)
    else if (flag === '--rounds') opts.rounds = Number(given)
    else if (flag === '--only') opts.groups = pick(given, GROUPS)
    else if (flag === '--routes') opts.routes = pick(given, ROUTES)
    else if (flag === '--profile') opts.profileDir = given
    else opts.out = given
  }
  if (!(opts.seconds > 0 && opts.seconds <= 60)) throw new Error('--seconds must be in (0, 60]')
  if (!(opts.connections >= 1 && opts.connections <= 256)) throw new Error('--connections must be 1..256')
  if (!(opts.rate >= 1 && opts.rate <= 5000)) throw new Error('--rate must be 1..5000')
  if (!(opts.attachmentRate >= 1 && opts.attachmentRate <= 5000))
    throw new Error('--attachment-rate must be 1..5000')
  if (!(opts.rounds >= 1 && opts.rounds <= 9)) throw new Error('--rounds must be 1..9')
  return opts
}

function pick<T extends string>(given: string, all: readonly T[]): T[] {
  const names = given.split(',') as T[]
  const bad = names.filter((n) => !all.includes(n))
  if (bad.length > 0) throw new Error(`unknown ${bad.join(', ')}; one of ${all.join(', ')}`)
  return names
}

/** One way of reaching a runtime: its origin, its path prefix, the headers of its credential, its processes. */
interface Contestant {
  name: string
  group: Group
  origin: string
  prefix: string
  headers: Record<string, string>
  runtime: Child
  pids(): number[]
  redis?: BenchRedis
}

/** 1 MiB of a file part, serialised by the platform's FormData (the boundary is its own). */
async function attachmentBody(): Promise<{ body: Buffer; type: string }> {
  const form = new FormData()
  form.append(
    'file',
    new Blob([Buffer.alloc(1024 * 1024, 0x61)], { type: 'application/octet-stream' }),
    'bench.bin',
  )
  const request = new Request('http://127.0.0.1/', { method: 'POST', body: form })
  return { body: Buffer.from(await request.arrayBuffer()), type: request.headers.get('content-type') ?? '' }
}

function shots(
  route: RouteName,
  c: Contestant,
  run: string,
  attachment: { body: Buffer; type: string },
): MakeShot {
  const base = { headers: c.headers }
  if (route === 'inbox') return () => ({ ...base, method: 'GET', path: `${c.prefix}inbox` })
  if (route === 'artifact')
    return () => ({ ...base, method: 'GET', path: `${c.prefix}artifacts/report.json` })
  if (route === 'attachment') {
    const headers = { ...c.headers, 'content-type': attachment.type }
    return () => ({ headers, method: 'POST', path: `${c.prefix}attachments`, body: attachment.body })
  }
  const headers = { ...c.headers, 'content-type': 'application/json' }
  let n = 0
  return () => ({
    headers,
    method: 'POST',
    path: `${c.prefix}messages`,
    body: JSON.stringify({ run, key: `bench-${c.name}-${n++}`, text: 'a message from the bench' }),
  })
}

interface Row {
  contestant: string
  group: Group
  reqPerS: number
  cpuUsPerReq: number
  p50: number
  p99: number
  redisCommandsPerReq: number | null
  sentCommandsPerReq: number | null
  /** Socket reads Redis made per request at the fixed rate: its round trips (background work included). */
  roundTripsPerReq: number | null
  failed: number
  firstFailure: string | null
}

/**
 * A MONITOR connection that has seen a marker of ours go by, so that it is past ioredis's first-line race:
 * when MONITOR's OK and the first monitored commands arrive in one read, ioredis emits "Command queue state
 * error" on the connection (seen with other clients keeping Redis busy). Such an attempt is closed and made
 * again. The connection is made here rather than by `redis.monitor()`, so that its error listener is there
 * before it connects: `monitor()` resolves after the OK, and a second error in that same read had no listener
 * and ended the bench (seen under load). `own` counts the commands this sent Redis (each MONITOR and marker).
 */
async function readyMonitor(redis: Redis): Promise<{ monitor: Redis; own: number }> {
  let own = 0
  for (let attempt = 1; ; attempt++) {
    const monitor = redis.duplicate({ monitor: true, lazyConnect: true })
    const marker = `krg-bench-monitor-${process.pid}-${attempt}`
    const outcome = await new Promise<Error | null>((resolve) => {
      const timer = setTimeout(() => resolve(new Error('MONITOR saw no marker in 10 s')), 10_000)
      const settle = (value: Error | null) => {
        clearTimeout(timer)
        resolve(value)
      }
      monitor.on('error', settle)
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) settle(null)
      })
      monitor.once('monitoring', () => {
        own++
        redis.echo(marker).catch(settle)
      })
      own++
      monitor.connect().catch(settle)
    })
    if (outcome === null) return { monitor, own }
    monitor.disconnect()
    if (attempt === 3) throw outcome
  }
}

/**
 * Counts the commands clients send Redis (not those a script runs) while `during` runs; null when the MONITOR
 * connection failed on the way (the figure is then not measured, and says so as `-`).
 */
async function sentCommands<T>(
  redis: Redis,
  during: () => Promise<T>,
): Promise<{ result: T; sent: number | null; own: number }> {
  const { monitor, own } = await readyMonitor(redis)
  let sent: number | null = 0
  monitor.on('error', () => {
    sent = null
  })
  monitor.on('monitor', (_time: string, _args: string[], source: string) => {
    if (source !== 'lua' && sent !== null) sent++
  })
  try {
    return { result: await during(), sent, own }
  } finally {
    monitor.disconnect()
  }
}

/** The unmeasured load before each slice. */
const SLICE_WARMUP_MS = 250

/** A contestant's closed loop, summed over its slices of one round. */
interface Loop {
  ok: number
  failed: number
  firstFailure: string | null
  seconds: number
  cpuS: number
  /** Redis commands (scripts' own included) over the slices; 0 without Redis. */
  commands: number
}

/**
 * One round of a route's closed loop for every contestant. Each is warmed up, then the `--seconds` are cut
 * into one-second slices taken in turn (A B C ... A B C ..., the first of each turn moving along; each after a
 * quarter second of unmeasured load), so that a shared machine speeding up or slowing down meanwhile weighs on
 * every contestant alike: its ratios are what they would be on a calm one. Contestants that share a runtime
 * (bearer and cookie of one gateway) share its run.
 */
async function closedLoops(
  opts: Options,
  route: RouteName,
  contestants: readonly Contestant[],
  attachment: { body: Buffer; type: string },
): Promise<{ loops: Loop[]; makes: MakeShot[] }> {
  const runs = new Map<Child, string>()
  for (const c of contestants)
    if (!runs.has(c.runtime)) runs.set(c.runtime, await c.runtime.call<string>('reset'))
  const makes = contestants.map((c) => shots(route, c, runs.get(c.runtime) as string, attachment))
  const loops = contestants.map(
    (): Loop => ({ ok: 0, failed: 0, firstFailure: null, seconds: 0, cpuS: 0, commands: 0 }),
  )
  for (const [i, c] of contestants.entries())
    await closedLoop(c.origin, makes[i] as MakeShot, opts.connections, opts.warmupSeconds * 1000)
  const slices = Math.max(1, Math.round(opts.seconds))
  const sliceMs = (opts.seconds * 1000) / slices
  for (let s = 0; s < slices; s++) {
    for (let k = 0; k < contestants.length; k++) {
      const i = (s + k) % contestants.length
      const c = contestants[i] as Contestant
      const loop = loops[i] as Loop
      // A process that sat idle while the others ran (V8 shrinks an idle heap) starts its slice under load.
      await closedLoop(c.origin, makes[i] as MakeShot, opts.connections, Math.min(SLICE_WARMUP_MS, sliceMs))
      const stats0 = c.redis ? await commandStats(c.redis.client) : {}
      const cpu0 = cpuOf(c.pids())
      const slice = await closedLoop(c.origin, makes[i] as MakeShot, opts.connections, sliceMs)
      loop.cpuS += cpuOf(c.pids()) - cpu0
      if (c.redis) {
        // The bench's own INFO calls are not the gateway's.
        const { info: _info, ...delta } = commandDelta(stats0, await commandStats(c.redis.client))
        loop.commands += Object.values(delta).reduce((a, b) => a + b, 0)
      }
      loop.ok += slice.ok
      loop.failed += slice.failed
      loop.firstFailure ??= slice.firstFailure
      loop.seconds += slice.seconds
    }
  }
  return { loops, makes }
}

/** A contestant's row of one round: its closed loop, then latency and Redis traffic at the fixed rate. */
async function measure(
  opts: Options,
  route: RouteName,
  c: Contestant,
  loop: Loop,
  make: MakeShot,
): Promise<Row> {
  const ms = opts.seconds * 1000
  // Uploads are kept by the runtime: start the latency phase from an empty one.
  if (route === 'attachment') await c.runtime.call('reset')
  const rate = route === 'attachment' ? opts.attachmentRate : opts.rate
  const timed = () => fixedRate(c.origin, make, rate, ms)
  const reads0 = c.redis ? await readsProcessed(c.redis.client) : 0
  const {
    result: rated,
    sent,
    own,
  } = c.redis ? await sentCommands(c.redis.client, timed) : { result: await timed(), sent: null, own: 0 }
  // Less the bench's own: MONITOR and its markers, and the INFO that reads the count.
  const reads = c.redis ? (await readsProcessed(c.redis.client)) - reads0 - own - 1 : null
  const total = loop.ok + loop.failed
  const row: Row = {
    contestant: c.name,
    group: c.group,
    reqPerS: loop.ok / loop.seconds,
    cpuUsPerReq: (loop.cpuS * 1e6) / Math.max(1, loop.ok),
    p50: quantile(rated.latencies, 0.5),
    p99: quantile(rated.latencies, 0.99),
    redisCommandsPerReq: c.redis ? loop.commands / Math.max(1, total) : null,
    sentCommandsPerReq: sent === null ? null : sent / Math.max(1, rated.ok + rated.failed),
    roundTripsPerReq: reads === null ? null : Math.max(0, reads) / Math.max(1, rated.ok + rated.failed),
    failed: loop.failed + rated.failed,
    firstFailure: loop.firstFailure ?? rated.firstFailure,
  }
  log(
    `${route} ${c.name}: ${row.reqPerS.toFixed(0)} req/s, ${row.cpuUsPerReq.toFixed(0)} µs CPU/req, p50 ${row.p50.toFixed(2)} ms` +
      (row.failed > 0 ? `, ${row.failed} failed (${row.firstFailure})` : ''),
  )
  return row
}

async function runtimeChild(): Promise<{ child: Child; url: string; pid: number }> {
  const child = new Child('proxy/runtime.ts', { BENCH_PORT: String(await freePort()) })
  const info = await child.call<{ url: string; pid: number }>('info')
  return { child, ...info }
}

export async function main(argv: string[]): Promise<void> {
  const opts = parse(argv)
  if (!opts.tsx && (opts.groups.includes('embedded') || opts.groups.includes('redis'))) {
    ensureBuilt(log)
  }
  const cleanups: (() => Promise<void> | void)[] = []
  // Interrupted, it still stops what it started (nginx, Redis and the gateways are not its IPC children).
  const interrupted = async (): Promise<void> => {
    for (const cleanup of cleanups.reverse()) await cleanup()
    process.exit(130)
  }
  process.once('SIGINT', interrupted)
  process.once('SIGTERM', interrupted)
  const contestants: Contestant[] = []
  const attachment = await attachmentBody()
  const bearer = await benchBearer()
  try {
    for (const group of opts.groups) {
      const rt = await runtimeChild()
      cleanups.push(() => rt.child.stop())
      const prefix = '/desktop/bench/mcp/'
      if (group === 'direct') {
        const origin = rt.url.replace(/\/$/, '')
        const headers = { [TOKEN_HEADER]: 'bench-token' }
        contestants.push({
          name: 'direct',
          group,
          origin,
          prefix: '/',
          headers,
          runtime: rt.child,
          pids: () => [rt.pid],
        })
      } else if (group === 'bare') {
        const bare = new Child(
          'proxy/bare-proxy.ts',
          { BENCH_UPSTREAM: rt.url },
          opts.profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`],
        )
        cleanups.push(() => bare.stop())
        const info = await bare.call<{ port: number; pid: number }>('info')
        const origin = `http://127.0.0.1:${info.port}`
        contestants.push({
          name: 'bare Fastify proxy',
          group,
          origin,
          prefix,
          headers: {},
          runtime: rt.child,
          pids: () => [info.pid],
        })
      } else if (group === 'nginx') {
        const port = await freePort()
        const nginx = new NginxServer(`  upstream runtime {
    server ${new URL(rt.url).host};
    keepalive 32;
  }
  server {
    listen 127.0.0.1:${port} backlog=4096;
    client_max_body_size 16m;
    location /desktop/bench/mcp/ {
      proxy_pass http://runtime/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header ${TOKEN_HEADER} bench-token;
      # Stream uploads through, as the Node proxies do.
      proxy_request_buffering off;
    }
  }`)
        cleanups.push(async () => {
          await nginx.stop()
          nginx.remove()
        })
        await nginx.start()
        const origin = `http://127.0.0.1:${port}`
        contestants.push({
          name: 'nginx',
          group,
          origin,
          prefix,
          headers: {},
          runtime: rt.child,
          pids: () => nginx.workers(),
        })
      } else {
        const redis = group === 'redis' ? await startRedis() : undefined
        if (redis) cleanups.push(() => redis.stop())
        const gw: GatewayProcess = await startGateway({
          upstream: rt.url,
          ...(redis ? { redisUrl: redis.url } : {}),
          ...(opts.profileDir === undefined ? {} : { profileDir: opts.profileDir }),
          tsx: opts.tsx,
        })
        // Stopped before Redis (cleanups run in reverse): its drain may still talk to Redis.
        cleanups.push(() => gw.stop())
        const cookie = await benchCookie(gw.origin, bearer)
        const common = {
          group,
          origin: gw.origin,
          prefix,
          runtime: rt.child,
          pids: () => [gw.pid],
          ...(redis ? { redis } : {}),
        }
        contestants.push(
          { ...common, name: `gateway ${group} bearer`, headers: { authorization: `Bearer ${bearer}` } },
          // A browser's write: same-origin by Fetch Metadata, as the CSRF rule asks.
          {
            ...common,
            name: `gateway ${group} cookie`,
            headers: { cookie, 'sec-fetch-site': 'same-origin' },
          },
        )
      }
    }
    log(`${contestants.length} contestants: ${contestants.map((c) => c.name).join(', ')}`)
    // Rounds repeat the slices and latency phases; each figure is the median over them.
    const rounds = new Map<RouteName, Row[][]>()
    for (let round = 0; round < opts.rounds; round++) {
      for (const route of opts.routes) {
        const { loops, makes } = await closedLoops(opts, route, contestants, attachment)
        for (const [i, c] of contestants.entries()) {
          const row = await measure(opts, route, c, loops[i] as Loop, makes[i] as MakeShot)
          const perContestant = rounds.get(route) ?? contestants.map(() => [])
          perContestant[i]?.push(row)
          rounds.set(route, perContestant)
        }
      }
    }
    const results = new Map<RouteName, Row[]>()
    for (const [route, perContestant] of rounds) results.set(route, perContestant.map(median))
    const report = render(opts, argv, results)
    const file =
      opts.out === undefined ? writeResult('proxy', new Date().toISOString().slice(0, 10), report) : opts.out
    if (opts.out !== undefined) writeFileSync(opts.out, report)
    log(`results in ${file}`)
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup()
  }
}

/** A contestant's rounds as one row: the median of each figure, every failure. */
function median(rows: Row[]): Row {
  const mid = (pick: (r: Row) => number | null): number => {
    const values = rows
      .map(pick)
      .filter((v): v is number => v !== null)
      .sort((a, b) => a - b)
    return values.length === 0 ? Number.NaN : quantile(values, 0.5)
  }
  const first = rows[0] as Row
  return {
    ...first,
    reqPerS: mid((r) => r.reqPerS),
    cpuUsPerReq: mid((r) => r.cpuUsPerReq),
    p50: mid((r) => r.p50),
    p99: mid((r) => r.p99),
    redisCommandsPerReq: first.redisCommandsPerReq === null ? null : mid((r) => r.redisCommandsPerReq),
    sentCommandsPerReq: first.sentCommandsPerReq === null ? null : mid((r) => r.sentCommandsPerReq),
    roundTripsPerReq: first.roundTripsPerReq === null ? null : mid((r) => r.roundTripsPerReq),
    failed: rows.reduce((n, r) => n + r.failed, 0),
    firstFailure: rows.find((r) => r.firstFailure !== null)?.firstFailure ?? null,
  }
}

const f = (n: number, digits = 0): string => (Number.isFinite(n) ? n.toFixed(digits) : '-')

function render(opts: Options, argv: string[], results: Map<RouteName, Row[]>): string {
  const lines = [
    `# Proxy bench, ${new Date().toISOString()}`,
    '',
    `Command: \`npm run bench -- proxy ${argv.join(' ')}\`; ${machine()}, load average at the end ${loadAverage()}.`,
    `Closed loop: ${opts.connections} connections, ${opts.seconds} s per contestant after ${opts.warmupSeconds} s of warm-up, in slices of about a second taken in turn by the contestants (a machine's drift weighs on all alike); latency at ${opts.rate} req/s (attachments ${opts.attachmentRate} req/s) for ${opts.seconds} s; ${opts.rounds} round(s), each figure the median over rounds.`,
    'Ratios are to the bare Fastify proxy of the same run (throughput, CPU per request); "+p50" is the p50 over the direct runtime at the fixed rate.',
    "Redis commands per request: INFO commandstats over the closed loop (commands scripts run included). Sent per request: what the gateway sent Redis at the fixed rate (MONITOR, commands inside scripts excluded; pipelined commands count one each, so this bounds round trips from above). Round trips per request: the socket reads Redis made at the fixed rate (INFO total_reads_processed; a pipeline read at once counts once; the gateway's background work included).",
    '',
  ]
  const targets: string[] = []
  for (const [route, rows] of results) {
    const bare = rows.find((r) => r.group === 'bare')
    const direct = rows.find((r) => r.group === 'direct')
    const bareAdded = bare && direct ? bare.p50 - direct.p50 : Number.NaN
    lines.push(`## ${route}`, '')
    lines.push(
      '| contestant | req/s | x bare | CPU µs/req | x bare | p50 ms | p99 ms | +p50 ms | Redis cmds/req | sent/req | round trips/req | failed |',
    )
    lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for (const r of rows) {
      const tx = bare ? r.reqPerS / bare.reqPerS : Number.NaN
      const cx = bare ? r.cpuUsPerReq / bare.cpuUsPerReq : Number.NaN
      const added = direct ? r.p50 - direct.p50 : Number.NaN
      lines.push(
        `| ${r.contestant} | ${f(r.reqPerS)} | ${f(tx, 2)} | ${f(r.cpuUsPerReq)} | ${f(cx, 2)} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${f(added, 2)} | ${r.redisCommandsPerReq === null ? '-' : f(r.redisCommandsPerReq, 2)} | ${r.sentCommandsPerReq === null ? '-' : f(r.sentCommandsPerReq, 2)} | ${r.roundTripsPerReq === null ? '-' : f(r.roundTripsPerReq, 2)} | ${r.failed}${r.firstFailure ? ` (${r.firstFailure})` : ''} |`,
      )
      if (r.group === 'embedded' || r.group === 'redis') {
        const checks = [
          `throughput ${f(tx, 2)}x ${tx >= 0.8 ? 'met' : 'NOT met'}`,
          `CPU ${f(cx, 2)}x ${cx <= 1.3 ? 'met' : 'NOT met'}`,
          // Whether a miss is the gateway's or any Node proxy's: the anchor's own figure beside it.
          `+p50 ${f(added, 2)} ms ${added <= 1 ? 'met' : `NOT met (bare proxy: ${f(bareAdded, 2)} ms)`}`,
          ...(r.roundTripsPerReq === null
            ? []
            : [
                `Redis round trips ${f(r.roundTripsPerReq, 2)}/req ${r.roundTripsPerReq <= 1 ? 'met' : 'NOT met'}`,
              ]),
        ]
        targets.push(`- ${route}, ${r.contestant}: ${checks.join('; ')}`)
      }
    }
    lines.push('')
  }
  if (targets.length > 0) {
    lines.push(
      '## Targets (throughput ≥0.8x bare, CPU/req ≤1.3x bare, +p50 ≤1 ms, Redis ≤1 per request)',
      '',
      ...targets,
      '',
    )
  }
  return lines.join('\n')
}

function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')
}
