import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { FastifyBaseLogger } from 'fastify'
import fp from 'fastify-plugin'
import { Cluster as RedisCluster } from 'ioredis'
import type { Env } from '../config.ts'
import type { EventBus } from '../events/bus.ts'
import { HubBus } from '../events/hub-bus.ts'
import { frameOf } from '../events/sse.ts'
import { Degraded } from '../routes/health.ts'
import { TokenVault } from '../sessions/token-vault.ts'
import { RedisBroker } from './broker.ts'
import { ChangeFeed } from './change-feed.ts'
import { type ConnectionRole, openConnection, type RedisClient, waitReady } from './connections.ts'
import { type ClusterKeys, clusterKeys } from './keys.ts'
import { clusterLiveChannels } from './live-channels-cluster.ts'
import { LiveLoop, liveChannels } from './live-loop.ts'
import {
  type ClusterMetrics,
  createClusterMetrics,
  registerDegradedGauge,
  trackConnection,
} from './metrics.ts'
import { RedisPresence } from './presence.ts'
import { RedisReaderLease } from './reader-lease.ts'
import { RedisHealth } from './redis-health.ts'
import { type ClusterCommands, defineScripts } from './scripts.ts'
import { RedisStreamSlots } from './stream-slots.ts'

/** What cluster mode adds to the app: the fixed connections and the Redis side of every seam. */
export interface Cluster {
  /** This process among the replicas (logs, presence, `CLIENT LIST` names). */
  readonly replicaId: string
  readonly keys: ClusterKeys
  /** The command connection (also `app.redis`), with the cluster's scripts defined. */
  readonly redis: RedisClient & ClusterCommands
  /** The pub/sub connection; subscribe through it, never issue ordinary commands on it. */
  readonly subscriber: RedisClient
  /** Encrypts messaging tokens at rest (GATEWAY_ENCRYPTION_KEY). */
  readonly vault: TokenVault
  /** The event bus over the Redis broker (one stream and live channel per session, one live loop per replica). */
  readonly bus: EventBus
  readonly lease: RedisReaderLease
  /** Leases of cluster-wide jobs (one replica runs each: token re-seal, Kasm sync), fenced like reader leases. */
  readonly jobLease: RedisReaderLease
  /** The per-operator stream cap, counted over every replica. */
  readonly streamSlots: RedisStreamSlots
  /** Who watches which session, over every replica (`app.presence`, decorated by the stores plugin). */
  readonly presence: RedisPresence
  /** Pub/sub change notifications over the subscriber connection (resync after reconnects). */
  readonly feed: ChangeFeed
  readonly metrics: ClusterMetrics
  /** The replica's standing with Redis (connecting, up, down): degraded mode and its logging follow it. */
  readonly health: RedisHealth
  readonly log: FastifyBaseLogger
  readonly env: Env
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The command connection in cluster mode (REDIS_URL, GATEWAY_REDIS_SENTINELS or GATEWAY_REDIS_CLUSTER_NODES set); null when embedded. */
    redis: RedisClient | null
    cluster: Cluster | null
  }
}

/** How long a session's stream outlives its last append. */
const STREAM_RETENTION_MS = 24 * 3600 * 1000
/** How long the boot waits for Redis before going on not ready (readiness tells the balancer). */
const BOOT_WAIT_MS = 5000

/**
 * Cluster mode when REDIS_URL, GATEWAY_REDIS_SENTINELS or GATEWAY_REDIS_CLUSTER_NODES is set: three fixed
 * connections per replica (command, live channels, subscriber), the Redis event bus and reader lease,
 * presence, a `redis` readiness check and metrics. Without any of them it only decorates `app.redis = null` and `app.cluster = null`; the stores plugin, registered
 * next, chooses the memory side of every seam then (src/stores/plugin.ts).
 *
 * Shutdown order: `preClose` releases every reader lease and withdraws presence at once (other replicas
 * take over without waiting for expiry); `onClose`, which runs after every later plugin's, stops the live
 * loop and closes the connections.
 */
export const clusterPlugin = fp(
  async (app) => {
    const env = app.config.env
    const redis = app.config.redis
    if (redis === null) {
      app.decorate('redis', null)
      app.decorate('cluster', null)
      return
    }
    if (!env.GATEWAY_ENCRYPTION_KEY) throw new Error('GATEWAY_ENCRYPTION_KEY is required in cluster mode')

    const replicaId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`
    const keys = clusterKeys(env.GATEWAY_REDIS_PREFIX, { hashTagged: redis.kind === 'cluster' })
    const settings = {
      redis,
      name: `${env.GATEWAY_REDIS_PREFIX}${replicaId}`.replace(/[^A-Za-z0-9:_.-]/g, '_'),
      commandTimeoutMs: env.GATEWAY_REDIS_COMMAND_TIMEOUT_MS,
    }
    const connections: Record<ConnectionRole, RedisClient> = {
      command: openConnection(settings, 'command'),
      live: openConnection(settings, 'live'),
      subscriber: openConnection(settings, 'subscriber'),
    }
    const command = defineScripts(connections.command)

    let loop: LiveLoop | undefined
    const metrics = createClusterMetrics(app.metrics.registry, () => loop?.watchedCount ?? 0)
    const health = new RedisHealth(connections, app.log)
    for (const [role, connection] of Object.entries(connections) as [ConnectionRole, RedisClient][]) {
      trackConnection(metrics, role, connection)
      connection.connect().catch(() => {})
    }
    registerDegradedGauge(app.metrics.registry, () => health.down)

    // On a Redis Cluster the live channels are sharded (SPUBLISH/SSUBSCRIBE): a publication stays on the
    // session's shard instead of being broadcast to every node.
    const live = connections.live
    const sharded = live instanceof RedisCluster
    loop = new LiveLoop({
      command,
      channels: live instanceof RedisCluster ? clusterLiveChannels(live) : liveChannels(live, false),
      streamKey: keys.events,
      channelOf: keys.live,
      frame: frameOf,
      log: app.log,
      quiet: () => health.down,
      onRead: (n) => metrics.read.inc(n),
      onStreamRead: (reason) => metrics.liveReads.inc({ reason }),
    })
    const bus = new HubBus(
      new RedisBroker({
        command,
        loop,
        keys,
        frame: frameOf,
        sharded,
        maxLen: env.GATEWAY_EVENT_BUFFER,
        maxBytes: env.GATEWAY_EVENT_BUFFER_BYTES,
        retentionMs: STREAM_RETENTION_MS,
        onAppend: (result, entries) => {
          metrics.appends.inc({ result })
          if (entries > 0) metrics.appended.inc(entries)
        },
      }),
    )
    const lease = new RedisReaderLease({
      command,
      keys,
      leaseMs: env.GATEWAY_LEASE_MS,
      onChange: (event, kasmId, held) => {
        metrics.leaseChanges.inc({ event })
        metrics.leases.set(held)
        if (event === 'lost' && !health.down) app.log.warn({ kasmId }, 'reader lease lost')
      },
    })
    const jobLease = new RedisReaderLease({
      command,
      keys,
      leaseMs: env.GATEWAY_LEASE_MS,
      keyspace: { lease: keys.jobLease, fence: keys.jobFence },
    })
    const presence = new RedisPresence({
      command,
      keys,
      replicaId,
      ttlMs: env.GATEWAY_PRESENCE_TTL_MS,
      log: app.log,
    })
    const streamSlots = new RedisStreamSlots({
      command,
      keys,
      replicaId,
      max: env.GATEWAY_MAX_STREAMS_PER_OPERATOR,
      ttlMs: env.GATEWAY_PRESENCE_TTL_MS,
      log: app.log,
      quiet: () => health.down,
    })
    const cluster: Cluster = {
      replicaId,
      keys,
      redis: command,
      subscriber: connections.subscriber,
      vault: TokenVault.fromBase64url(env.GATEWAY_ENCRYPTION_KEY),
      bus,
      lease,
      jobLease,
      streamSlots,
      presence,
      feed: new ChangeFeed(connections.subscriber, app.log),
      metrics,
      health,
      log: app.log,
      env,
    }
    app.decorate<RedisClient | null, 'redis'>('redis', command)
    app.decorate('cluster', cluster)

    // Once the replica has been up, losing Redis degrades it instead of failing readiness: every replica loses
    // the same Redis at once, and an ingress with no ready endpoint would refuse even what needs no Redis.
    app.readiness.add('redis', async () => {
      const state = health.state
      if (state.kind === 'down') {
        throw new Degraded(
          `redis ${state.connection} connection lost (${state.reason}) at ${iso(state.since)}`,
        )
      }
      for (const [role, connection] of Object.entries(connections)) {
        if (connection.status !== 'ready') throw new Error(`redis ${role} connection ${connection.status}`)
      }
      await command.ping()
    })

    app.addHook('preClose', async () => {
      const released = await lease.releaseAll()
      await jobLease.releaseAll()
      if (released > 0) app.log.info({ released }, 'reader leases released for shutdown')
      await presence.close()
      await streamSlots.close()
    })
    app.addHook('onClose', async () => {
      await bus.close()
      health.closing()
      await Promise.all(Object.values(connections).map((c) => closeConnection(c)))
    })

    const ready = await Promise.all(Object.values(connections).map((c) => waitReady(c, BOOT_WAIT_MS)))
    if (ready.includes(false)) app.log.warn('redis not reachable at boot; starting not ready')
    const via =
      redis.kind === 'sentinel'
        ? { sentinel: { master: redis.master, sentinels: redis.sentinels.map((x) => `${x.host}:${x.port}`) } }
        : redis.kind === 'cluster'
          ? { redisCluster: { nodes: redis.nodes.map((x) => `${x.host}:${x.port}`) } }
          : {}
    app.log.info({ replicaId, prefix: keys.prefix, ...via }, 'cluster mode: redis connected')
  },
  { name: 'cluster', dependencies: ['readiness', 'metrics'] },
)

function iso(ms: number): string {
  return new Date(ms).toISOString()
}

/**
 * QUIT when connected (flushes replies), otherwise drop the socket; waits for the end, at most a second (a
 * connection that is between reconnect attempts never emits one: disconnect only cancels the next attempt).
 */
async function closeConnection(connection: RedisClient): Promise<void> {
  if (connection.status === 'end') return
  let timer: NodeJS.Timeout | undefined
  const ended = new Promise<void>((resolve) => {
    connection.once('end', () => resolve())
    timer = setTimeout(resolve, 1000)
    timer.unref()
  })
  if (connection.status === 'ready') await connection.quit().catch(() => connection.disconnect())
  else connection.disconnect()
  await ended
  clearTimeout(timer)
}
