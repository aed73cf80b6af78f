import { type ChildProcess, spawn } from 'node:child_process'
import http from 'node:http'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createParser } from 'eventsource-parser'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { type Family, parseExposition } from '../helpers/prometheus.ts'
import { childEnv, TS_CHILD_FLAGS } from '../helpers/server-process.ts'
import { BOOT_MS } from '../helpers/wait.ts'
import {
  deletePrefix,
  freePort,
  REDIS_TEST_URL,
  type RedisServer,
  startRedisServer,
  uniquePrefix,
  until,
} from './redis-harness.ts'

/**
 * Real gateway replicas as child processes (`node src/server.ts`, see TS_CHILD_FLAGS), a real redis-server of the
 * test's own (so it can be killed and restarted), and the simulated runtime in the test process.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
export const TOKEN = 'messaging-token-for-cluster-tests'
/** 32 bytes, base64url: only for tests. */
export const TEST_ENCRYPTION_KEY = 'Q2x1c3Rlci10ZXN0LWtleS0zMi1ieXRlcy1sb25nISE'

/**
 * The environment of an in-process replica on the shared test Redis (REDIS_TEST_URL) under a key prefix of its
 * own, deleted when the test ends; give every replica of one test the same object.
 */
export function sharedRedisEnv(t: { after(fn: () => unknown): void }): Record<string, string> {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  return {
    REDIS_URL: REDIS_TEST_URL,
    GATEWAY_REDIS_PREFIX: prefix,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
  }
}

/** Lines of output kept per replica (a test at LOG_LEVEL=info reads a whole outage's). */
const MAX_LINES = 20_000

/** One gateway process. */
export interface Replica {
  readonly index: number
  readonly url: string
  readonly child: ChildProcess
  /** stdout and stderr, whole lines prefixed `[r<index>] `, for assertions and the failure message. */
  readonly output: string[]
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  alive(): boolean
}

export interface Cluster {
  readonly redis: RedisServer
  readonly runtime: SimulatedRuntime
  readonly replicas: Replica[]
  readonly prefix: string
  /** A bearer for `alice`, role admin, every team. */
  readonly admin: string
  /** The environment every replica got (start another with {@link Cluster.startReplica}). */
  readonly env: Record<string, string>
  startReplica(index: number): Promise<Replica>
  /** Registers `kasmId` on the runtime through the admin API of replica 0 and waits until all see it. */
  addSession(kasmId: string): Promise<void>
  /** Lines of output of every replica (attach to a failing assertion). */
  logs(): string
}

/**
 * Spawns one replica with `env` on a free port and waits until `/readyz` answers 200. `maxOpenFiles`: under that
 * descriptor limit (the shell's `ulimit -n`, soft and hard, before it execs node).
 */
export async function startReplica(
  index: number,
  env: Record<string, string>,
  options: { maxOpenFiles?: number } = {},
): Promise<Replica> {
  const port = await freePort()
  const node = [process.execPath, ...TS_CHILD_FLAGS, 'src/server.ts']
  const argv =
    options.maxOpenFiles === undefined
      ? node
      : ['/bin/sh', '-c', `ulimit -n ${options.maxOpenFiles} && exec "$@"`, 'sh', ...node]
  const child = spawn(argv[0] as string, argv.slice(1), {
    cwd: root,
    env: childEnv({ ...env, PORT: String(port), HOST: '127.0.0.1' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output: string[] = []
  // A chunk may end mid-line: each stream keeps its unfinished line for the next chunk.
  const keeper = (): ((chunk: Buffer) => void) => {
    let partial = ''
    return (chunk) => {
      const lines = (partial + chunk.toString()).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) if (line) output.push(`[r${index}] ${line}`)
      if (output.length > MAX_LINES) output.splice(0, output.length - MAX_LINES)
    }
  }
  child.stdout?.on('data', keeper())
  child.stderr?.on('data', keeper())
  let exitedFlag = false
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => {
      exitedFlag = true
      r({ code, signal })
    }),
  )
  const url = `http://127.0.0.1:${port}`
  try {
    await until(
      `replica ${index} ready`,
      async () => {
        if (exitedFlag) throw new Error(`replica ${index} exited:\n${output.join('\n')}`)
        return (await getStatus(`${url}/readyz`)) === 200
      },
      BOOT_MS,
    )
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
  return { index, url, child, output, exited, alive: () => !exitedFlag }
}

/**
 * The environment of a test replica in cluster mode under `prefix`, with short leases and retries; `redis`
 * says where Redis is (REDIS_URL, or the Sentinel variables) and may override anything.
 */
export function clusterTestEnv(prefix: string, redis: Record<string, string>): Record<string, string> {
  return testEnv({
    LOG_LEVEL: 'warn',
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_REDIS_PREFIX: prefix,
    GATEWAY_LEASE_MS: '2000',
    GATEWAY_STREAM_LINGER_MS: '0',
    GATEWAY_UPSTREAM_RETRY_SCALE: '0.05',
    GATEWAY_PING_INTERVAL_MS: '1000',
    GATEWAY_PRESENCE_TTL_MS: '3000',
    GATEWAY_SHUTDOWN_GRACE_MS: '10000',
    // As in testEnv: a replica stalled by a loaded machine must not shed the test's own requests.
    GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
    ...redis,
  })
}

/** Kills the replicas still alive and waits for every exit (for `t.after`). */
export async function stopReplicas(replicas: readonly Replica[]): Promise<void> {
  for (const r of replicas) if (r.alive()) r.child.kill('SIGKILL')
  await Promise.all(replicas.map((r) => r.exited))
}

/** Starts redis-server, the simulated runtime and `n` replicas; all stopped by `t.after`. */
export async function startCluster(
  t: { after(fn: () => unknown): void },
  n: number,
  extraEnv: Record<string, string> = {},
): Promise<Cluster> {
  const redis = await startRedisServer()
  t.after(() => redis.stop())
  const runtime = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 5000 })
  t.after(() => runtime.close())
  const prefix = uniquePrefix()
  const env = clusterTestEnv(prefix, { REDIS_URL: redis.url, ...extraEnv })
  const replicas: Replica[] = []
  t.after(() => stopReplicas(replicas))
  const start = async (index: number): Promise<Replica> => {
    const replica = await startReplica(index, env)
    replicas.push(replica)
    return replica
  }
  await Promise.all(Array.from({ length: n }, (_, i) => start(i)))
  replicas.sort((a, b) => a.index - b.index)
  const admin = await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] }, { expiresIn: '1h' })
  const cluster: Cluster = {
    redis,
    runtime,
    replicas,
    prefix,
    admin,
    env,
    startReplica: start,
    async addSession(kasmId) {
      const alive = replicas.filter((r) => r.alive())
      const first = alive[0] as Replica
      const res = await request(`${first.url}/admin/sessions/${kasmId}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: TOKEN }),
      })
      if (res.status !== 201 && res.status !== 200) throw new Error(`PUT session: ${res.status} ${res.body}`)
      for (const r of alive) {
        await until(`replica ${r.index} knows ${kasmId}`, async () => {
          const got = await request(`${r.url}/admin/sessions/${kasmId}`, {
            headers: { authorization: `Bearer ${admin}` },
          })
          return got.status === 200
        })
      }
    },
    logs: () => replicas.flatMap((r) => r.output).join('\n'),
  }
  return cluster
}

/** A small HTTP client (no keep-alive, so a killed replica leaves no pooled socket behind). */
export function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const req = http.request(
      url,
      { method: opts.method ?? 'GET', headers: opts.headers, agent: false },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => {
          body += d
        })
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')))
    req.end(opts.body)
  })
}

/** Answers question `requestId` of `run` on session `kasmId` through `replica` as `token`'s holder. */
export function replyTo(
  replica: Replica,
  token: string,
  kasmId: string,
  reply: { run: string; requestId: string; key: string; values: Record<string, unknown> },
): ReturnType<typeof request> {
  return request(`${replica.url}/desktop/${kasmId}/mcp/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      run: reply.run,
      key: reply.key,
      reply_to: reply.requestId,
      revision: 1,
      values: reply.values,
    }),
  })
}

async function getStatus(url: string): Promise<number> {
  try {
    return (await request(url)).status
  } catch {
    return 0
  }
}

/**
 * A viewer as a sidebar behaves: reads the event stream of one replica and, when it ends or breaks,
 * reconnects to the next live replica with `Last-Event-ID`. Records every event id it got.
 */
export class RoamingViewer {
  readonly kasmId: string
  readonly token: string
  /** `run:seq` of every event, in arrival order (duplicates included, so a test can see them). */
  readonly ids: string[] = []
  reconnects = 0
  #closed = false
  #req: http.ClientRequest | undefined
  #at: number
  readonly #servers: () => string[]

  constructor(kasmId: string, token: string, servers: () => string[], start: number) {
    this.kasmId = kasmId
    this.token = token
    this.#servers = servers
    this.#at = start
  }

  /** The replica currently read (index into the servers list at connect time). */
  get server(): number {
    return this.#at
  }

  /** The seqs received, in order. */
  seqs(): number[] {
    return this.ids.map((id) => Number(id.slice(id.lastIndexOf(':') + 1)))
  }

  start(): void {
    this.#connect()
  }

  close(): void {
    this.#closed = true
    this.#req?.destroy()
  }

  /** Breaks the current connection from the client's side: the viewer reconnects with `Last-Event-ID`. */
  cut(): void {
    this.#req?.destroy()
  }

  #connect(): void {
    if (this.#closed) return
    const servers = this.#servers()
    // Mid-restart no replica may be listed: come back when one is, as a client retrying would.
    if (servers.length === 0) {
      setTimeout(() => this.#connect(), 100).unref()
      return
    }
    const base = servers[this.#at % servers.length]
    const last = this.ids.at(-1)
    const headers: Record<string, string> = {
      accept: 'text/event-stream',
      authorization: `Bearer ${this.token}`,
    }
    if (last !== undefined) headers['last-event-id'] = last
    // Once per connection, however many of its events (error, close) say it ended.
    let ended = false
    const retry = (): void => {
      if (this.#closed || ended) return
      ended = true
      this.reconnects++
      this.#at++
      setTimeout(() => this.#connect(), 100 + Math.floor(Math.random() * 100)).unref()
    }
    const req = http.get(`${base}/desktop/${this.kasmId}/mcp/events`, { headers, agent: false })
    this.#req = req
    req.on('error', retry)
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        res.on('end', retry)
        return
      }
      const parser = createParser({
        onEvent: (e) => {
          if (e.id !== undefined && e.id !== '') this.ids.push(e.id)
        },
      })
      const decoder = new TextDecoder()
      res.on('data', (chunk: Buffer) => parser.feed(decoder.decode(chunk, { stream: true })))
      res.on('close', retry)
      res.on('error', () => {})
    })
  }
}

/** Emits `count` log events on the runtime, `perTick` every `intervalMs`; resolves after the last. */
export async function emitSteadily(
  runtime: SimulatedRuntime,
  count: number,
  intervalMs: number,
  perTick = 1,
): Promise<number> {
  let last = 0
  for (let i = 0; i < count; i += perTick) {
    for (let j = 0; j < perTick && i + j < count; j++) {
      last = runtime.emit('log', { level: 'info', msg: `event ${i + j}` }).seq
    }
    await new Promise((r) => setTimeout(r, intervalMs))
  }
  return last
}

/** Asserts-friendly summary: whether `seqs` is exactly `from..to`, else a short description of what is wrong. */
export function contiguity(seqs: readonly number[], from: number, to: number): string {
  const problems: string[] = []
  const seen = new Set<number>()
  for (const s of seqs) {
    if (seen.has(s)) problems.push(`duplicate ${s}`)
    seen.add(s)
  }
  for (let s = from; s <= to; s++) if (!seen.has(s)) problems.push(`missing ${s}`)
  for (let i = 1; i < seqs.length; i++) {
    if ((seqs[i] as number) < (seqs[i - 1] as number)) problems.push(`out of order at ${i}`)
  }
  return problems.length === 0 ? 'ok' : problems.slice(0, 10).join(', ')
}

/** Which replicas hold a reader lease now, from their /metrics (krg_cluster_leases_held). */
export async function leaseHolders(replicas: readonly Replica[]): Promise<number[]> {
  const held: number[] = []
  for (const r of replicas) {
    if (!r.alive()) continue
    try {
      const res = await request(`${r.url}/metrics`)
      const m = /^krg_cluster_leases_held (\d+)/m.exec(res.body)
      if (m && Number(m[1]) > 0) held.push(r.index)
    } catch {
      // a replica going down answers nothing
    }
  }
  return held
}

/** The JSON log records of `replica` from line `from` of its output on (other lines are skipped). */
export function logRecords(replica: Replica, from = 0): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = []
  for (const line of replica.output.slice(from)) {
    const json = line.slice(line.indexOf('] ') + 2)
    if (!json.startsWith('{')) continue
    try {
      out.push(JSON.parse(json) as Record<string, unknown>)
    } catch {
      // not a log record
    }
  }
  return out
}

/** One replica's `/metrics`, parsed; empty when it does not answer. */
export async function metricsOf(replica: Replica): Promise<Map<string, Family>> {
  try {
    return parseExposition((await request(`${replica.url}/metrics`)).body)
  } catch {
    return new Map()
  }
}
