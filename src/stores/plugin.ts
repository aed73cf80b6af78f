import { hostname } from 'node:os'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { MemoryAuditLog } from '../audit/memory-log.ts'
import { AuditStreams } from '../audit/streams.ts'
import { MemoryFailureCounter } from '../auth/address-failures.ts'
import { MemoryCookieStore } from '../auth/cookie-store.ts'
import { MemoryLoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import { MemoryUsedLogoutTokens } from '../auth/oidc/used-logout-tokens.ts'
import { MemoryRateLimitStore } from '../auth/rate-limit-store.ts'
import { inProcess } from '../auth/sealer.ts'
import { MemoryChatMessageStore } from '../chat/messages.ts'
import { MemoryTeamsInstallationStore } from '../chat/msteams/installations.ts'
import { MemorySeenKeys } from '../chat/seen-keys.ts'
import { RedisAuditLog } from '../cluster/audit-log.ts'
import { RedisBoard } from '../cluster/board.ts'
import { RedisChatLinkStore } from '../cluster/chat-link-store.ts'
import { RedisChatMessageStore, RedisSeenKeys } from '../cluster/chat-state.ts'
import type { RedisClient } from '../cluster/connections.ts'
import { RedisCookieStore } from '../cluster/cookie-store.ts'
import { RedisDeliveryLedger } from '../cluster/delivery-ledger.ts'
import { RedisFailureCounter } from '../cluster/failure-counter.ts'
import { LeasedJob } from '../cluster/job-lease.ts'
import { RedisStaleSessions } from '../cluster/kasm-stale.ts'
import { clusterKeys } from '../cluster/keys.ts'
import { RedisLoginAttemptStore } from '../cluster/login-attempts.ts'
import type { Cluster } from '../cluster/plugin.ts'
import { leasingRateLimitStore } from '../cluster/rate-limit-store.ts'
import { RedisReportStore } from '../cluster/report-store.ts'
import { Resealer } from '../cluster/reseal.ts'
import { RedisSessionStore } from '../cluster/session-store.ts'
import { RedisTeamsInstallationStore } from '../cluster/teams-installations.ts'
import { RedisUsedLogoutTokens } from '../cluster/used-logout-tokens.ts'
import { MemoryEventBus, MemoryReaderLease } from '../events/memory-bus.ts'
import { MemoryPresence, type Presence } from '../events/presence.ts'
import { MemoryStreamSlots } from '../events/stream-slots.ts'
import { MemoryChatLinkStore } from '../identity/chat-link-store.ts'
import { MemoryStaleSessions } from '../kasm/stale.ts'
import { MemoryDeliveryLedger } from '../notify/ledger.ts'
import { MemoryReportStore } from '../report/memory-store.ts'
import { MemorySessionStore } from '../sessions/memory-store.ts'
import type { SessionStore } from '../sessions/store.ts'
import { MemoryBoard } from '../summary/board.ts'
import type { Stores } from './types.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Every store, memory or Redis, chosen once (src/stores/plugin.ts). */
    stores: Stores
    /** Who watches which session: this replica's counts, or every replica's through Redis (`stores.presence`). */
    presence: Presence
  }
}

/**
 * The composition root of the stores: the one place that decides memory or Redis. Registered right after the
 * cluster plugin, it decorates `app.stores` with the Redis side of every seam when the app has a cluster, the
 * memory side otherwise, and `app.presence` (bound to the event path's viewers once the app is ready).
 *
 * Lifecycles stay where they were: the cluster plugin closes its connections, bus, leases, presence and
 * slots; each feature closes the store it uses; this plugin starts the Redis session store and its re-seal
 * job and closes the memory bus.
 */
export const storesPlugin = fp(
  async (app) => {
    const cluster = app.hasDecorator('cluster') ? app.cluster : null
    const stores = cluster ? await clusterStores(app, cluster) : memoryStores(app)
    app.decorate('stores', stores)
    app.decorate('presence', stores.presence)
    app.addHook('onReady', async () => {
      if (app.hasDecorator('events')) stores.presence.setSource(() => app.events.streams.viewers())
    })
    if (!cluster) app.addHook('onClose', () => stores.bus.close())
  },
  { name: 'stores', dependencies: ['metrics'] },
)

function retentionMs(days: number): number {
  return days * 24 * 3600 * 1000
}

/** Session change listeners run inside the store's notify; what one throws is logged, never propagated. */
function listenerErrorLogger(app: FastifyInstance): (err: unknown) => void {
  return (err) => app.log.error({ err }, 'session change listener failed')
}

function memoryStores(app: FastifyInstance): Stores {
  const env = app.config.env
  const jobLease = new MemoryReaderLease()
  return {
    shared: false,
    replicaId: `${hostname()}-${process.pid}`,
    down: () => false,
    sessions: new MemorySessionStore(listenerErrorLogger(app)),
    cookies: new MemoryCookieStore({ idleMs: env.GATEWAY_COOKIE_IDLE_S * 1000 }),
    loginAttempts: new MemoryLoginAttemptStore(),
    usedLogoutTokens: new MemoryUsedLogoutTokens(),
    sealer: inProcess,
    signInFailures: new MemoryFailureCounter(),
    slackSignatureFailures: new MemoryFailureCounter(),
    msteamsBearerFailures: new MemoryFailureCounter(),
    audit: new AuditStreams(
      new MemoryAuditLog(env.GATEWAY_AUDIT_RECORDS),
      new MemoryAuditLog(env.GATEWAY_AUDIT_REFUSED_RECORDS),
    ),
    board: new MemoryBoard(),
    bus: new MemoryEventBus({
      capacity: env.GATEWAY_EVENT_BUFFER,
      maxBytes: env.GATEWAY_EVENT_BUFFER_BYTES,
      totalBytes: env.GATEWAY_EVENT_BUFFER_TOTAL_BYTES,
    }),
    readerLease: new MemoryReaderLease(),
    streamSlots: new MemoryStreamSlots(env.GATEWAY_MAX_STREAMS_PER_OPERATOR),
    presence: new MemoryPresence(),
    rateLimit: sharedRateLimit(app),
    report: new MemoryReportStore(retentionMs(env.GATEWAY_REPORT_RETENTION_DAYS)),
    staleSessions: () => new MemoryStaleSessions(),
    deliveryLedger: () => new MemoryDeliveryLedger(),
    chatLinks: () => new MemoryChatLinkStore(),
    chatMessages: once(() => new MemoryChatMessageStore()),
    seenKeys: once(() => new MemorySeenKeys()),
    teamsInstallations: once(() => new MemoryTeamsInstallationStore()),
    // The one process is the whole cluster: its memory lease always grants.
    leasedJob: (options) => new LeasedJob({ ...options, lease: jobLease, leaseMs: env.GATEWAY_LEASE_MS }),
  }
}

async function clusterStores(app: FastifyInstance, cluster: Cluster): Promise<Stores> {
  const env = cluster.env
  const down = (): boolean => cluster.health.down
  const { redis: command, keys, feed } = cluster
  // Two capped streams shared by every replica (the trail, and refusals apart), records batched for up to 100 ms.
  const audit = new RedisAuditLog({ command, keys, capacity: env.GATEWAY_AUDIT_RECORDS, log: cluster.log })
  const auditRefused = new RedisAuditLog({
    command,
    keys,
    key: keys.auditRefused,
    capacity: env.GATEWAY_AUDIT_REFUSED_RECORDS,
    log: cluster.log,
  })
  // The last requests' records are written before the connections close (the cluster's onClose runs later).
  app.addHook('onClose', () => Promise.all([audit.flush(), auditRefused.flush()]))
  return {
    shared: true,
    replicaId: cluster.replicaId,
    down,
    sessions: await redisSessionStore(app, cluster),
    // Every lookup reads Redis, so a revocation is honoured by every replica at once; each revocation is
    // published on the change feed so every replica ends that session's streams.
    cookies: new RedisCookieStore({ command, keys, idleMs: env.GATEWAY_COOKIE_IDLE_S * 1000, feed }),
    loginAttempts: new RedisLoginAttemptStore(command, keys.loginAttempt),
    // SET NX with the token's expiry: a logout token is acted on once by the whole cluster.
    usedLogoutTokens: new RedisUsedLogoutTokens(command, keys.usedLogoutToken),
    sealer: cluster.vault,
    signInFailures: new RedisFailureCounter(command, keys.signInFailures),
    slackSignatureFailures: new RedisFailureCounter(command, keys.slackSignatureFailures),
    msteamsBearerFailures: new RedisFailureCounter(command, keys.msteamsBearerFailures),
    audit: new AuditStreams(audit, auditRefused),
    // A hash per session, changes published to every replica.
    board: new RedisBoard({ command, feed, keys }),
    bus: cluster.bus,
    readerLease: cluster.lease,
    streamSlots: cluster.streamSlots,
    presence: cluster.presence,
    rateLimit: sharedRateLimit(app),
    // A sorted set per team; each record claimed with SET NX as it is added, so replicas write it once.
    report: new RedisReportStore(command, keys, retentionMs(env.GATEWAY_REPORT_RETENTION_DAYS)),
    staleSessions: () => new RedisStaleSessions(command, keys.kasmStale),
    // Claimed with SET NX before sending, so one replica sends each delivery once.
    deliveryLedger: () => new RedisDeliveryLedger(command, keys),
    chatLinks: () => new RedisChatLinkStore(command, keys),
    chatMessages: () => new RedisChatMessageStore(command, keys),
    seenKeys: () => new RedisSeenKeys(command, keys),
    teamsInstallations: () => new RedisTeamsInstallationStore(command, keys),
    leasedJob: (options) =>
      new LeasedJob({ ...options, lease: cluster.jobLease, leaseMs: env.GATEWAY_LEASE_MS, quiet: down }),
  }
}

/** A factory that makes its one instance on first use: a memory store asked for twice must be one store. */
function once<T>(make: () => T): () => T {
  let made: T | undefined
  return () => {
    made ??= make()
    return made
  }
}

/**
 * The registry's store: a Redis hash, tokens encrypted, mirrored in memory, changes announced; its records
 * kept on the first GATEWAY_ENCRYPTION_KEY by the re-seal job (stopped before the app closes).
 */
async function redisSessionStore(app: FastifyInstance, cluster: Cluster): Promise<SessionStore> {
  const quiet = (): boolean => cluster.health.down
  const store = new RedisSessionStore({
    command: cluster.redis,
    feed: cluster.feed,
    keys: cluster.keys,
    vault: cluster.vault,
    replicaId: cluster.replicaId,
    log: cluster.log,
    onListenerError: listenerErrorLogger(app),
    quiet,
  })
  await store.start()
  const resealer = new Resealer({
    store,
    vault: cluster.vault,
    command: cluster.redis,
    keys: cluster.keys,
    replicaId: cluster.replicaId,
    lease: cluster.jobLease,
    leaseMs: cluster.env.GATEWAY_LEASE_MS,
    perSecond: cluster.env.GATEWAY_RESEAL_PER_S,
    log: cluster.log,
    quiet,
    registry: app.metrics.registry,
  })
  resealer.start()
  app.addHook('preClose', () => resealer.stop())
  return store
}

/**
 * Rate-limit counters follow the command connection (`app.redis`), shared by every replica, each leasing
 * units of an operator's budget a few at a time (no round trip per request). The rate-limit tests build it
 * beside an `app.redis` and no cluster.
 */
function sharedRateLimit(app: FastifyInstance): Stores['rateLimit'] {
  const redis = app.hasDecorator('redis') ? app.getDecorator<RedisClient | null>('redis') : null
  if (!redis) return new MemoryRateLimitStore()
  return leasingRateLimitStore(redis, clusterKeys(app.config.env.GATEWAY_REDIS_PREFIX).rateLimit)
}
