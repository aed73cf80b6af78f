import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes, randomInt } from 'node:crypto'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import pino from 'pino'
import { RedisBroker } from '../../src/cluster/broker.ts'
import {
  type ConnectionRole,
  openConnection,
  type RedisClient,
  waitReady,
} from '../../src/cluster/connections.ts'
import { type ClusterKeys, clusterKeys } from '../../src/cluster/keys.ts'
import { LiveLoop, type LiveReadReason, liveChannels } from '../../src/cluster/live-loop.ts'
import { RedisReaderLease } from '../../src/cluster/reader-lease.ts'
import { type ClusterCommands, defineScripts } from '../../src/cluster/scripts.ts'
import type { RedisEndpoint } from '../../src/config.ts'
import { HubBus } from '../../src/events/hub-bus.ts'
import { frameOf } from '../../src/events/sse.ts'
import { waitFor as until, WAIT_MS } from '../helpers/wait.ts'

/** The Redis the unit tests use: REDIS_TEST_URL, default the local one CI starts. */
export const REDIS_TEST_URL = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379'

/** A key prefix no other test (or run) shares. */
export function uniquePrefix(): string {
  return `krgtest:${randomBytes(4).toString('hex')}:`
}

/** Deletes every key under `prefix`. */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 })
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await redis.del(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}

export { until }

/**
 * Where {@link freePort} chooses: below the kernel's ephemeral ports (32768-60999 on Linux, where every listen(0)
 * and every outgoing connection takes its port), and apart from the Redis Cluster harness's (20000 and up).
 */
const FREE_PORTS = { from: 10_000, count: 10_000 }

/** True when 127.0.0.1:`port` can be listened on now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * A port to listen on later (a child's boot, a stack whose IdP must know the gateway's address first), free
 * now. Chosen at random below the ephemeral range: until the listen, no outgoing connection and no listen(0)
 * of any process can take it (one did, as an ephemeral port, in a loaded run: EADDRINUSE).
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = FREE_PORTS.from + randomInt(FREE_PORTS.count)
    if (await portIsFree(port)) return port
  }
  throw new Error(`no free port in ${FREE_PORTS.from}-${FREE_PORTS.from + FREE_PORTS.count - 1}`)
}

/** Waits until the redis-server (or sentinel) on 127.0.0.1:`port` answers PING, with `password` if it has one. */
export async function waitForRedis(port: number, password?: string): Promise<void> {
  const probe = new Redis(port, '127.0.0.1', {
    ...(password === undefined ? {} : { password }),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: null,
  })
  probe.on('error', () => {})
  try {
    await until(`redis on ${port} answers`, async () => {
      try {
        if (probe.status !== 'ready') await probe.connect()
        return (await probe.ping()) === 'PONG'
      } catch {
        probe.disconnect()
        return false
      }
    })
  } finally {
    probe.disconnect()
  }
}

/** Kills (SIGKILL) the processes still running and waits until every one has exited. */
export async function killAll(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve()
          c.once('exit', () => resolve())
          c.kill('SIGKILL')
        }),
    ),
  )
}

/** redis-server arguments of every test server: loopback only, nothing persisted, quiet. */
export const EPHEMERAL_REDIS_ARGS: readonly string[] = [
  '--bind',
  '127.0.0.1',
  '--save',
  '',
  '--appendonly',
  'no',
  '--loglevel',
  'warning',
]

/** A redis-server this test started (and restarts, kills) on its own port. */
export interface RedisServer {
  readonly url: string
  readonly port: number
  /** Stops it (SIGKILL: nothing is saved) and waits for the exit. */
  stop(): Promise<void>
  /** Starts it again on the same port, empty. */
  start(): Promise<void>
}

/** Starts redis-server on `port` (default a free one), without persistence, and waits until it answers. */
export async function startRedisServer(port?: number): Promise<RedisServer> {
  port ??= await freePort()
  let child: ChildProcess | undefined
  const start = async (): Promise<void> => {
    child = spawn('redis-server', ['--port', String(port), ...EPHEMERAL_REDIS_ARGS], { stdio: 'ignore' })
    await waitForRedis(port)
  }
  const stop = async (): Promise<void> => {
    const c = child
    child = undefined
    if (c) await killAll([c])
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, port, stop, start }
}

/** The Redis side of the event seam as one replica builds it, without Fastify. */
export interface ReplicaParts {
  readonly command: Redis & ClusterCommands
  /** The live channels' subscriber connection. */
  readonly live: Redis
  readonly keys: ClusterKeys
  /** The replica's live loop (the metric of watched sessions). */
  readonly fanout: LiveLoop
  /** Streams the live loop read instead of taking them from their channel, by reason. */
  readonly liveReads: Readonly<Record<LiveReadReason, number>>
  readonly bus: HubBus<string>
  readonly lease: RedisReaderLease
  close(): Promise<void>
}

/** Builds one replica's bus and lease over fresh connections. */
export async function replicaParts(
  url: string,
  prefix: string,
  opts: {
    maxLen?: number
    maxBytes?: number
    leaseMs?: number
    name?: string
    /** Where the live connection goes instead of `url` (a relay the test controls). */
    liveUrl?: string
    /** Where the command connection goes instead of `url` (a relay the test controls). */
    commandUrl?: string
    /** The live loop's bound on publications held while it reads a stream. */
    maxPending?: number
    /** The live loop's probe interval (ms). */
    probeMs?: number
  } = {},
): Promise<ReplicaParts> {
  const settings = {
    redis: { kind: 'url', url } as const,
    name: opts.name ?? `${prefix}test`,
    commandTimeoutMs: 2000,
  }
  const at = (relay: string | undefined) =>
    relay === undefined ? settings : { ...settings, redis: { kind: 'url', url: relay } as const }
  const command = defineScripts(openConnection(at(opts.commandUrl), 'command'))
  const live = openConnection(at(opts.liveUrl), 'live')
  for (const c of [command, live]) {
    c.on('error', () => {})
    c.connect().catch(() => {})
  }
  await Promise.all([waitReady(command, WAIT_MS), waitReady(live, WAIT_MS)])
  const keys = clusterKeys(prefix)
  const liveReads: Record<LiveReadReason, number> = { join: 0, gap: 0, resync: 0 }
  const fanout = new LiveLoop({
    command,
    channels: liveChannels(live, false),
    streamKey: keys.events,
    channelOf: keys.live,
    frame: frameOf,
    log: pino({ level: 'silent' }),
    ...(opts.probeMs === undefined ? {} : { probeMs: opts.probeMs }),
    ...(opts.maxPending === undefined ? {} : { maxPending: opts.maxPending }),
    onStreamRead: (reason) => liveReads[reason]++,
  })
  const bus = new HubBus(
    new RedisBroker({
      command,
      loop: fanout,
      keys,
      frame: frameOf,
      sharded: false,
      maxLen: opts.maxLen ?? 4096,
      ...(opts.maxBytes === undefined ? {} : { maxBytes: opts.maxBytes }),
      retentionMs: 600_000,
    }),
  )
  const lease = new RedisReaderLease({ command, keys, leaseMs: opts.leaseMs ?? 5000 })
  return {
    command,
    live,
    keys,
    fanout,
    liveReads,
    bus,
    lease,
    async close() {
      await bus.close()
      command.disconnect()
      live.disconnect()
    },
  }
}

/**
 * Where a store test's Redis is: the shared test Redis under a fresh prefix (deleted when the test ends), or a
 * Redis Cluster (test/cluster/redis-cluster-harness.ts) whose keys are laid out for it (`hashTagged`).
 */
export interface StoreRedis {
  readonly endpoint: RedisEndpoint
}

/** The shared test Redis (REDIS_TEST_URL). */
export const SHARED_REDIS: StoreRedis = { endpoint: { kind: 'url', url: REDIS_TEST_URL } }

let opened = 0

/**
 * The key set of a store test on `redis` under a fresh prefix: hash-tagged on a Redis Cluster, as the cluster
 * plugin lays them out; on the shared test Redis the prefix is deleted when the test ends.
 */
export function storeKeys(t: { after(fn: () => unknown): void }, redis: StoreRedis): ClusterKeys {
  const prefix = uniquePrefix()
  if (redis.endpoint.kind === 'url') {
    const url = redis.endpoint.url
    t.after(() => deletePrefix(url, prefix))
  }
  return clusterKeys(prefix, { hashTagged: redis.endpoint.kind === 'cluster' })
}

/** One ready connection of `role` to `redis` as a replica opens it, closed when the test ends. */
export async function storeConnection(
  t: { after(fn: () => unknown): void },
  redis: StoreRedis,
  role: ConnectionRole = 'command',
): Promise<RedisClient> {
  const c = openConnection(
    { redis: redis.endpoint, name: `krgtest-${++opened}`, commandTimeoutMs: 2000 },
    role,
  )
  c.on('error', () => {})
  c.connect().catch(() => {})
  t.after(() => c.disconnect())
  await waitReady(c, WAIT_MS)
  return c
}
