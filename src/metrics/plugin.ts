import fp from 'fastify-plugin'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { AuthRefusalReason } from '../auth/plugin.ts'
import type { FailureReason } from '../upstream/failures.ts'
import { version } from '../version.ts'
import { LabelledHistogram } from './labelled-histogram.ts'

/** The `reason` label values of `krg_upstream_errors_total`: proxied requests' failures and event streams'. */
export type UpstreamErrorReason = FailureReason | 'stream_dropped' | 'stream_stalled'

/**
 * Every reason each counter knows, so that its series exist (at 0) from the first scrape: an alert on
 * `rate(...[5m]) > 0` or `increase(...)` sees the first failure instead of a series that appears with it. The
 * `Record<Union, true>` types make the compiler name a reason added to the union but not here.
 */
const upstreamErrorReasons = {
  unreachable: true,
  timeout: true,
  token_refused: true,
  stream_dropped: true,
  stream_stalled: true,
  address_refused: true,
  redirect: true,
  bad_answer: true,
} satisfies Record<UpstreamErrorReason, true>

const authFailureReasons = {
  missing: true,
  malformed: true,
  expired: true,
  not_yet_valid: true,
  bad_signature: true,
  wrong_issuer: true,
  wrong_audience: true,
  missing_claim: true,
  invalid_claim: true,
  alg: true,
  unknown_key: true,
  jwks_unavailable: true,
  cookie_invalid: true,
  cookie_expired: true,
  cookie_idle: true,
  cookie_revoked: true,
  csrf: true,
  forbidden: true,
  ticket_invalid: true,
  store_unavailable: true,
  signin_rate_limited: true,
  signin_denied: true,
  signin_state_invalid: true,
  signin_code_invalid: true,
  signin_token_invalid: true,
  idp_refused: true,
  idp_unavailable: true,
  no_role: true,
  logout_token_invalid: true,
} satisfies Record<AuthRefusalReason, true>

/**
 * The gateway's Prometheus registry and the metrics shared across folders. A folder with metrics of its
 * own (events, cluster) registers them on `app.metrics.registry`. Labels never carry a token or an id
 * a person typed: routes are the matched route pattern, not the URL.
 */
export interface GatewayMetrics {
  readonly registry: Registry
  /** Answered requests and ended streams, summed when scraped (nothing increments it). */
  readonly requests: Counter<'route' | 'method' | 'status'>
  /** Answered requests' durations (to the last byte); event streams go to {@link streamDuration}. */
  readonly requestDuration: LabelledHistogram<'route' | 'method' | 'status'>
  /** Event streams that ended, counted into {@link requests}. */
  readonly endedStreams: Counter<'route' | 'method' | 'status'>
  /** How long hijacked responses (event streams) stayed open. */
  readonly streamDuration: Histogram<'route'>
  readonly upstreamLatency: LabelledHistogram<'route' | 'status'>
  readonly upstreamErrors: Counter<'reason'>
  readonly authFailures: Counter<'reason'>
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: GatewayMetrics
  }
}

/** Sets each of `values` to 0 under `label`, so the series are there before their first event. */
export function zeroed<L extends string>(counter: Counter<L>, label: L, values: Iterable<string>): void {
  for (const value of values) counter.inc({ [label]: value } as Partial<Record<L, string>>, 0)
}

/** Creates a fresh registry per app so tests with several apps in one process do not collide. */
export function createMetrics(): GatewayMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  new Gauge({
    name: 'krg_build_info',
    help: 'Always 1; the labels say which gateway version runs on which Node.js',
    labelNames: ['version', 'node'],
    registers: [registry],
  }).set({ version, node: process.version }, 1)
  const requestDuration = new LabelledHistogram({
    name: 'krg_http_request_duration_seconds',
    help: 'Time from a request to the last byte of its answer, by matched route, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  })
  // Not exported itself: its counts are part of krg_http_requests_total.
  const endedStreams = new Counter({
    name: 'krg_http_ended_streams',
    help: 'Event streams ended, by matched route, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [],
  })
  const metrics: GatewayMetrics = {
    registry,
    requests: new Counter({
      name: 'krg_http_requests_total',
      help: 'Requests answered by the gateway, by matched route, method and status (event streams when they end)',
      labelNames: ['route', 'method', 'status'],
      registers: [registry],
      // Summed when scraped from what is counted anyway: answered requests are the duration histogram's
      // `_count`, so a request costs one labelled update, not two.
      async collect() {
        this.reset()
        const [durations, streams] = await Promise.all([requestDuration.get(), endedStreams.get()])
        for (const { metricName, labels, value } of durations.values)
          if (metricName?.endsWith('_count')) this.inc(labels, value)
        for (const { labels, value } of streams.values) this.inc(labels, value)
      },
    }),
    requestDuration,
    endedStreams,
    streamDuration: new Histogram({
      name: 'krg_http_stream_duration_seconds',
      help: 'How long event streams stayed open, by route (counted when they end)',
      labelNames: ['route'],
      buckets: [1, 10, 60, 300, 900, 1800, 3600, 7200, 14_400, 28_800],
      registers: [registry],
    }),
    upstreamLatency: new LabelledHistogram({
      name: 'krg_upstream_request_duration_seconds',
      help: 'Time until the runtime answered with headers, by v1 route and status',
      labelNames: ['route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'krg_upstream_errors_total',
      help: 'Failures of requests to the runtimes and of their event streams, by reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
    authFailures: new Counter({
      name: 'krg_auth_failures_total',
      help: 'Refused credentials and requests, by reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
  }
  zeroed(metrics.upstreamErrors, 'reason', Object.keys(upstreamErrorReasons))
  zeroed(metrics.authFailures, 'reason', Object.keys(authFailureReasons))
  return metrics
}

/** Decorates `app.metrics` and counts every answered request by its route pattern, with its duration. */
export const metricsPlugin = fp(
  async (app) => {
    const metrics = createMetrics()
    app.decorate('metrics', metrics)
    // Callback-style: an async hook would cost every request a promise.
    app.addHook('onResponse', (request, reply, done) => {
      const labels = {
        route: request.routeOptions.url ?? 'unmatched',
        method: request.method,
        status: String(reply.statusCode),
      }
      metrics.requestDuration.observe(labels, reply.elapsedTime / 1000)
      done()
    })
  },
  { name: 'metrics' },
)
