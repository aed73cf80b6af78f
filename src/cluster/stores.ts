import type { FastifyInstance } from 'fastify'
import type { AuditLog } from '../audit/types.ts'
import type { CookieSessionStore } from '../auth/cookie-store.ts'
import type { LoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import type { Sealer } from '../auth/sealer.ts'
import type { FailureCounter } from '../auth/signin-failures.ts'
import { MemoryReaderLease } from '../events/memory-bus.ts'
import { MemoryStaleSessions, type StaleSessions } from '../kasm/stale.ts'
import type { DeliveryLedger } from '../notify/ledger.ts'
import type { SessionStore } from '../sessions/store.ts'
import type { SessionBoard } from '../summary/board.ts'
import { RedisAuditLog } from './audit-log.ts'
import { RedisBoard } from './board.ts'
import { RedisCookieStore } from './cookie-store.ts'
import { RedisDeliveryLedger } from './delivery-ledger.ts'
import { RedisFailureCounter } from './failure-counter.ts'
import type { JobLease } from './job-lease.ts'
import { RedisStaleSessions } from './kasm-stale.ts'
import { RedisLoginAttemptStore } from './login-attempts.ts'
import type { Cluster } from './plugin.ts'
import { Resealer } from './reseal.ts'
import { RedisSessionStore } from './session-store.ts'

/**
 * The Redis side of each store seam, for the one selection line in each folder's plugin:
 * `redisX(app) ?? new MemoryX(…)`. Each answers null in embedded mode (no REDIS_URL).
 */

/** The app's cluster, or null when embedded (or when the cluster plugin is not registered, as in unit tests). */
export function clusterOf(app: FastifyInstance): Cluster | null {
  return app.hasDecorator('cluster') ? app.cluster : null
}

/**
 * The session registry's store: Redis hash, tokens encrypted, mirrored in memory, changes announced; its
 * records kept on the first GATEWAY_ENCRYPTION_KEY by the re-seal job.
 */
export async function redisSessionStore(
  app: FastifyInstance,
  onListenerError: (err: unknown) => void = () => {},
): Promise<SessionStore | null> {
  const cluster = clusterOf(app)
  if (!cluster) return null
  const store = new RedisSessionStore({
    command: cluster.redis,
    feed: cluster.feed,
    keys: cluster.keys,
    vault: cluster.vault,
    replicaId: cluster.replicaId,
    log: cluster.log,
    onListenerError,
    quiet: () => cluster.health.down,
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
    quiet: () => cluster.health.down,
    registry: app.metrics.registry,
  })
  resealer.start()
  app.addHook('preClose', () => resealer.stop())
  return store
}

/**
 * The lease of a cluster-wide job (one replica runs it): the cluster's fenced job lease, or, embedded, the
 * memory lease that always grants (the one process is the whole cluster).
 */
export function clusterJobLease(app: FastifyInstance): JobLease {
  return clusterOf(app)?.jobLease ?? new MemoryReaderLease()
}

/**
 * Cookie sessions: every lookup reads Redis, so a revocation is honoured by every replica at once, and each
 * revocation is published on the change feed so every replica ends that session's streams.
 */
export function redisCookieStore(app: FastifyInstance): CookieSessionStore | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisCookieStore({
    command: cluster.redis,
    keys: cluster.keys,
    idleMs: cluster.env.GATEWAY_COOKIE_IDLE_S * 1000,
    feed: cluster.feed,
  })
}

/** Sign-ins waiting for their callback, which any replica may receive. */
export function redisLoginAttemptStore(app: FastifyInstance): LoginAttemptStore | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisLoginAttemptStore(cluster.redis, cluster.keys.loginAttempt)
}

/** What seals secrets kept in Redis (IdP tokens, login attempts): the vault of GATEWAY_ENCRYPTION_KEY. */
export function clusterSealer(app: FastifyInstance): Sealer | null {
  return clusterOf(app)?.vault ?? null
}

/** Failed sign-ins per client address, counted across every replica. */
export function redisFailureCounter(app: FastifyInstance): FailureCounter | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisFailureCounter(cluster.redis, cluster.keys.signInFailures)
}

/** Audit records: one capped stream (GATEWAY_AUDIT_RECORDS) shared by every replica. */
export function redisAuditLog(app: FastifyInstance): AuditLog | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  const log = new RedisAuditLog({
    command: cluster.redis,
    keys: cluster.keys,
    capacity: cluster.env.GATEWAY_AUDIT_RECORDS,
    log: cluster.log,
  })
  // The last requests' records are written before the connections close (the cluster's onClose runs later).
  app.addHook('onClose', () => log.flush())
  return log
}

/** Sessions the Kasm sync flagged stale: one Redis hash shared by every replica, or in memory. */
export function staleSessions(app: FastifyInstance): StaleSessions {
  const cluster = clusterOf(app)
  return cluster ? new RedisStaleSessions(cluster.redis, cluster.keys.kasmStale) : new MemoryStaleSessions()
}

/** Session boards (reader health, question claims): a hash per session, changes published to every replica. */
export function redisSessionBoard(app: FastifyInstance): SessionBoard | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisBoard({ command: cluster.redis, feed: cluster.feed, keys: cluster.keys })
}

/** Webhook deliveries (src/notify): claimed in Redis before sending, so one replica sends each once. */
export function redisDeliveryLedger(app: FastifyInstance): DeliveryLedger | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisDeliveryLedger(cluster.redis, cluster.keys)
}
