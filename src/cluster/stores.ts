import type { FastifyInstance } from 'fastify'
import type { AuditLog } from '../audit/types.ts'
import type { CookieSessionStore } from '../auth/cookie-store.ts'
import type { SessionStore } from '../sessions/store.ts'
import type { SessionBoard } from '../summary/board.ts'
import { RedisAuditLog } from './audit-log.ts'
import { RedisBoard } from './board.ts'
import { RedisCookieStore } from './cookie-store.ts'
import type { Cluster } from './plugin.ts'
import { RedisSessionStore } from './session-store.ts'

/**
 * The Redis side of each store seam, for the one selection line in each folder's plugin:
 * `redisX(app) ?? new MemoryX(…)`. Each answers null in embedded mode (no REDIS_URL).
 */

/** The app's cluster, or null when embedded (or when the cluster plugin is not registered, as in unit tests). */
export function clusterOf(app: FastifyInstance): Cluster | null {
  return app.hasDecorator('cluster') ? app.cluster : null
}

/** The session registry's store: Redis hash, tokens encrypted, mirrored in memory, changes announced. */
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
  })
  await store.start()
  return store
}

/** Cookie sessions: every lookup reads Redis, so a revocation is honoured by every replica at once. */
export function redisCookieStore(app: FastifyInstance): CookieSessionStore | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisCookieStore({
    command: cluster.redis,
    keys: cluster.keys,
    idleMs: cluster.env.GATEWAY_COOKIE_IDLE_S * 1000,
  })
}

/** Audit records: one capped stream (GATEWAY_AUDIT_RECORDS) shared by every replica. */
export function redisAuditLog(app: FastifyInstance): AuditLog | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisAuditLog({
    command: cluster.redis,
    keys: cluster.keys,
    capacity: cluster.env.GATEWAY_AUDIT_RECORDS,
    log: cluster.log,
  })
}

/** Session boards (reader health, question claims): a hash per session, changes published to every replica. */
export function redisSessionBoard(app: FastifyInstance): SessionBoard | null {
  const cluster = clusterOf(app)
  if (!cluster) return null
  return new RedisBoard({ command: cluster.redis, feed: cluster.feed, keys: cluster.keys })
}
