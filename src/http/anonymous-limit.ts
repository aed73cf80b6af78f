import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Counter } from 'prom-client'
import type { RateLimitStore } from '../auth/rate-limit-store.ts'
import { AnonymousRateLimited } from '../errors.ts'
import { PROBE_PATHS } from '../routes/health.ts'
import { LogThrottle } from './log-throttle.ts'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false`: requests without a credential are not limited per address here (the route checks its own). */
    anonymousLimit?: false
  }
}

/** Options of {@link registerAnonymousLimit}. */
export interface AnonymousLimitOptions {
  /** GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: requests without a credential per address per window; 0: no limit. */
  readonly max: number
  /** GATEWAY_RATE_LIMIT_WINDOW_MS. */
  readonly windowMs: number
  /** The rate limit's counters (`stores.rateLimit`): this process's, or leased from Redis by every replica. */
  readonly store: RateLimitStore
  /** Whether the request presents a credential (which authentication then judges). */
  readonly hasCredential: (request: FastifyRequest) => boolean
}

/** At most one log line per this long says how many were limited meanwhile. */
const LOG_EVERY_MS = 10_000

/**
 * The limit of requests that present no credential at all, per client address (as GATEWAY_TRUST_PROXY makes
 * it): an `onRequest` hook that runs before any credential is looked at, any body read or any session
 * resolved. Over the budget the answer is 429 `anonymous_rate_limited` with Retry-After, counted in
 * `krg_anonymous_requests_limited_total` and logged once per {@link LOG_EVERY_MS} at most; the audit does not
 * record these refusals one by one. A credential, good or bad, is authentication's to judge (forged ones count
 * against the address's failed sign-ins); probes and routes with `config.anonymousLimit: false` (the IdP's
 * back-channel logout, whose credential is its body) are never limited here. A store that fails lets the
 * request pass: the limit protects capacity, it does not authenticate.
 */
export function registerAnonymousLimit(app: FastifyInstance, options: AnonymousLimitOptions): void {
  const { max, windowMs, store, hasCredential } = options
  if (max === 0) return
  const limited = new Counter({
    name: 'krg_anonymous_requests_limited_total',
    help: 'Requests without a credential answered 429 anonymous_rate_limited: their address was over GATEWAY_ANONYMOUS_RATE_LIMIT_MAX',
    registers: [app.metrics.registry],
  })
  const throttle = new LogThrottle(LOG_EVERY_MS)
  const note = (request: FastifyRequest): void => {
    limited.inc()
    const count = throttle.count()
    if (count === null) return
    request.log.warn(
      { address: request.ip, limited: count, max, windowMs },
      'requests without a credential limited per address',
    )
  }
  // Callback-style, as every hook each request passes; a credential costs one header and one cookie lookup.
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions
    if (hasCredential(request) || route.config?.anonymousLimit === false || PROBE_PATHS.has(route.url ?? ''))
      return done()
    store.incr(`anon:${request.ip}`, windowMs, max, (err, count) => {
      if (err !== null || count === undefined || count.current <= max) return done()
      note(request)
      const seconds = String(Math.max(1, Math.ceil(count.ttl / 1000)))
      reply.header('retry-after', seconds)
      done(new AnonymousRateLimited(seconds))
    })
  })
}
