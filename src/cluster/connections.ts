import { Redis, type RedisOptions } from 'ioredis'
import type { RedisEndpoint } from '../config.ts'

/**
 * The fixed Redis connections of one replica. Their number never depends on viewers or sessions:
 * - `command`: every ordinary command (scripts, stores, rate limits), pipelined by ioredis;
 * - `live`: the live channels of every watched session (one subscription per session, src/cluster/live-loop.ts);
 * - `subscriber`: pub/sub of the stores' change notifications (registry, board, revoked cookies).
 */
export type ConnectionRole = 'command' | 'live' | 'subscriber'

/** Options shared by the three connections. */
export interface ConnectionSettings {
  /** One address, or a Sentinel group's master (config.redis). */
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
export function openConnection(settings: ConnectionSettings, role: ConnectionRole): Redis {
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
  const url = settings.redis.url
  return url === undefined ? new Redis(options) : new Redis(url, options)
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

/** Resolves once the connection is ready, or after `timeoutMs` (false) so a boot never hangs on Redis. */
export function waitReady(connection: Redis, timeoutMs: number): Promise<boolean> {
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
