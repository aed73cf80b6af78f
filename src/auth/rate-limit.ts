import rateLimit, { type FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { RateLimited } from '../errors.ts'

/** Routes never limited: probes and scrapes must keep answering under load. */
const unlimited: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

/** Options of {@link registerRateLimit}. */
export interface RateLimitOptions {
  max: number
  windowMs: number
  /** Counters shared across replicas (`stores.rateLimit`); null for the plugin's own in-memory ones. */
  store: FastifyRateLimitStoreCtor | null
}

/** The key a request is counted under: the operator once authenticated, else the client address. */
export function rateLimitKey(request: FastifyRequest): string {
  return request.operator ? `op:${request.operator.sub}` : `ip:${request.ip}`
}

/**
 * Registers @fastify/rate-limit for every route (except {@link unlimited}) in the `preHandler` phase.
 * The plugin appends its hook after a route's own preHandlers, so `requireAccess` has already set
 * `request.operator` and the budget is per operator; routes without auth count per client IP. A route
 * can set `config: { rateLimit: { max, timeWindow } }` for its own budget or `rateLimit: false` to opt out.
 * When the counter store fails (Redis down) requests pass: the limit protects capacity, it is not auth.
 * With Redis the counters are shared by every replica (`stores.rateLimit`, chosen in src/stores).
 */
export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  await app.register(rateLimit, {
    global: true,
    hook: 'preHandler',
    max: options.max,
    timeWindow: options.windowMs,
    keyGenerator: rateLimitKey,
    allowList: (request) => unlimited.has(request.routeOptions.url ?? ''),
    skipOnError: true,
    // An answer within the budget says nothing of it: with leases (cluster mode) a replica's count is not
    // the operator's, and three headers on every answer cost more than a client reading them gains. A 429
    // says how long to wait (Retry-After) and the budget (X-RateLimit-Limit, -Remaining, -Reset).
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
    // Shared counters, leased by each replica a few units at a time: no round trip per request.
    ...(options.store ? { store: options.store } : {}),
    errorResponseBuilder: (_request, context) => new RateLimited(String(Math.ceil(context.ttl / 1000))),
  })
}
