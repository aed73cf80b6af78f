import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import type { RedisEndpoint } from '../config.ts'

/**
 * The fixed Redis connections of one replica. Their number never depends on viewers or sessions:
 * - `command`: every ordinary command (scripts, stores, rate limits), pipelined by ioredis;
 * - `live`: the live channels of every watched session (one subscription per session, src/cluster/live-loop.ts);
 * - `subscriber`: pub/sub of the stores' change notifications (registry, board, revoked cookies).
 *
 * On a Redis Cluster (GATEWAY_REDIS_CLUSTER_NODES) each is an ioredis `Cluster`: one socket per node it needs
 * (commands go to the master of their key's slot; `live` keeps one sharded subscriber per master), still a
 * fixed number per replica.
 */
export type ConnectionRole = 'command' | 'live' | 'subscriber'

/**
 * A connection that takes commands: one Redis (one address, Sentinel) or a Redis Cluster. Stores take this,
 * never `Redis`, so each runs on either; what differs (a MULTI or script may touch one slot only, a pipeline
 * one node only) is handled where it matters (`isCluster`, see cluster/client.ts).
 */
export type RedisClient = Redis | Cluster

/** Options shared by the three connections. */
export interface ConnectionSettings {
  /** One address, a Sentinel group's master, or a Redis Cluster (config.redis). */
  readonly redis: RedisEndpoint
  /** Shown in `CLIENT LIST`, e.g. `krg:<replica>`. */
  readonly name: string
  /** Ordinary commands fail after this long (a hung Redis must not hang requests). */
  readonly commandTimeoutMs: number
}

/**
 * Reconnect delay: exponential from 50 ms, capped at 1 s, with jitter so replicas do not reconnect in
 * lock-step after an outage. Never gives up: a replica outlives any Redis outage.
 */
export function reconnectDelay(times: number): number {
  const base = Math.min(50 * 2 ** Math.min(times, 10), 1000)
  return Math.round(base / 2 + Math.random() * (base / 2))
}

/**
 * Opens one connection of the given role. Nothing is queued while disconnected (`enableOfflineQueue`
 * false): a write during an outage fails at once and the caller answers 503 instead of waiting.
 * The connection is lazy; call `connect()` (errors are reported through the `error` event).
 */
export function openConnection(
  settings: ConnectionSettings & { readonly redis: Exclude<RedisEndpoint, { kind: 'cluster' }> },
  role: ConnectionRole,
): Redis
export function openConnection(settings: ConnectionSettings, role: ConnectionRole): RedisClient
export function openConnection(settings: ConnectionSettings, role: ConnectionRole): RedisClient {
  const options: RedisOptions = {
    lazyConnect: true,
    connectionName: `${settings.name}:${role}`,
    enableOfflineQueue: false,
    // A command in flight when the socket drops fails at once instead of waiting for a resend: its caller
    // retries or answers 503 (a subscription is made again on the reconnect, then confirmed by its owner).
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: reconnectDelay,
    ...(role === 'command' ? { commandTimeout: settings.commandTimeoutMs } : {}),
    keepAlive: 10_000,
    ...sentinelOptions(settings.redis),
  }
  const redis = settings.redis
  if (redis.kind === 'cluster') return new Cluster([...redis.nodes], clusterOptions(redis, role, options))
  const url = redis.url
  return url === undefined ? new Redis(options) : new Redis(url, options)
}

/**
 * A Redis Cluster: every node connection gets the same safety options as a single connection (no offline
 * queue, no retry of a command in flight, the command timeout), and so does the cluster client itself.
 *
 * - No `enableAutoPipelining`: ioredis 5 fails an auto-pipelined batch that comes back MOVED (after a
 *   failover) instead of following the new slot map, as it does for single commands.
 * - `shardedSubscribers` on `live` only: ioredis then opens a subscriber connection per master, needed for
 *   SSUBSCRIBE and useless elsewhere; `subscriber` keeps plain SUBSCRIBE (ioredis picks one node, and PUBLISH
 *   reaches every node's subscribers).
 * - `scaleReads: 'master'`: a replica may lag; the registry, cookie sessions and leases must be read where
 *   they were written.
 * - `clusterRetryStrategy`: the same backoff as a single connection, never giving up.
 * - TLS (`rediss:`): `dnsLookup` is the identity, so the TLS handshake checks the certificate against the
 *   host name the cluster announces, not an address it resolved to (what ioredis advises for AWS ElastiCache
 *   and other managed clusters with TLS).
 */
function clusterOptions(
  redis: Extract<RedisEndpoint, { kind: 'cluster' }>,
  role: ConnectionRole,
  node: RedisOptions,
): ClusterOptions {
  const { retryStrategy: _retry, enableOfflineQueue: _queue, ...redisOptions } = node
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    scaleReads: 'master',
    clusterRetryStrategy: (times) => reconnectDelay(times),
    slotsRefreshTimeout: 2000,
    // `live` subscribes with SSUBSCRIBE: one subscriber per master, where its channels' slots are.
    shardedSubscribers: role === 'live',
    redisOptions: {
      ...redisOptions,
      ...(redis.username === undefined ? {} : { username: redis.username }),
      ...(redis.password === undefined ? {} : { password: redis.password }),
      ...(redis.tls ? { tls: {} } : {}),
    },
    ...(redis.natMap === undefined ? {} : { natMap: { ...redis.natMap } }),
    ...(redis.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  }
}

/**
 * With Sentinel, each connection asks the sentinels (in the given order, then the ones they name) for the
 * master, watches them for `+switch-master` so a failover moves it at once, and reconnects (to the new master)
 * when a demoted one answers a write with READONLY. REDIS_URL, if set, still gives the master's credentials,
 * database and TLS; with `rediss:` the sentinels are reached over TLS too.
 */
function sentinelOptions(redis: RedisEndpoint): RedisOptions {
  if (redis.kind !== 'sentinel') return {}
  const tls = redis.url?.startsWith('rediss:') === true
  return {
    sentinels: redis.sentinels.map(({ host, port }) => ({ host, port })),
    name: redis.master,
    ...(redis.sentinelPassword === undefined ? {} : { sentinelPassword: redis.sentinelPassword }),
    failoverDetector: true,
    sentinelRetryStrategy: reconnectDelay,
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
  }
}

/**
 * Resolves once the connection is ready, or after `timeoutMs` (false) so a boot never hangs on Redis. A
 * Cluster is ready once it knows the slots (CLUSTER SLOTS answered and CLUSTER INFO says ok).
 */
export function waitReady(connection: RedisClient, timeoutMs: number): Promise<boolean> {
  if (connection.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer)
      connection.off('ready', onReady)
      resolve(ok)
    }
    const onReady = (): void => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    timer.unref()
    connection.on('ready', onReady)
  })
}
