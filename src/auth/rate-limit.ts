import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { RateLimited } from '../errors.ts'
import type { RateLimitCount, RateLimitStore } from './rate-limit-store.ts'

/** Routes never limited: probes and scrapes must keep answering under load. */
const unlimited: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

/** A route's own budget (`config: { rateLimit: { max, timeWindow } }`), or `false` for none. */
export type RouteRateLimit = false | { readonly max: number; readonly timeWindow: number }

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RouteRateLimit
  }
}

/** Options of {@link registerRateLimit}. */
export interface RateLimitOptions {
  max: number
  windowMs: number
  /** The counters (`stores.rateLimit`): this process's, or shared by every replica through Redis. */
  store: RateLimitStore
}

/** The key a request is counted under: the operator once authenticated, else the client address. */
export function rateLimitKey(request: FastifyRequest): string {
  return request.operator ? `op:${request.operator.sub}` : `ip:${request.ip}`
}

/**
 * The per-operator rate limit, a `preHandler` hook for every route (but {@link unlimited}): `requireAccess`
 * ran in onRequest, so `request.operator` is set and the budget is per operator; routes without auth count
 * per client address. A route can set `config: { rateLimit: { max, timeWindow } }` for a budget of its own
 * (counted apart, under its method and URL) or `rateLimit: false` to opt out. Over the budget: 429
 * `rate_limited` with Retry-After and X-RateLimit-Limit, -Remaining and -Reset; within it, no header (with
 * leases a replica's count is not the operator's). When the store fails (Redis down) requests pass: the
 * limit protects capacity, it is not auth.
 *
 * Ours rather than @fastify/rate-limit: a callback hook that costs a request no promise when the count is
 * at hand, where the plugin's costs five (it was 3% of the proxy's CPU per request).
 */
export function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): void {
  const { store } = options
  const refuse = (reply: FastifyReply, max: number, count: RateLimitCount): Error => {
    const seconds = String(Math.ceil(count.ttl / 1000))
    reply.header('retry-after', seconds)
    reply.header('x-ratelimit-limit', String(max))
    reply.header('x-ratelimit-remaining', '0')
    reply.header('x-ratelimit-reset', seconds)
    return new RateLimited(seconds)
  }
  app.addHook('preHandler', (request, reply, done) => {
    const route = request.routeOptions
    const own = route.config?.rateLimit
    if (own === false || unlimited.has(route.url ?? '')) return done()
    const max = own === undefined ? options.max : own.max
    const windowMs = own === undefined ? options.windowMs : own.timeWindow
    const key =
      own === undefined ? rateLimitKey(request) : `${request.method}${route.url}-${rateLimitKey(request)}`
    store.incr(key, windowMs, max, (err, count) => {
      if (err !== null || count === undefined || count.current <= max) return done()
      done(refuse(reply, max, count))
    })
  })
}
