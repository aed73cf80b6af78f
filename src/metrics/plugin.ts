import fp from 'fastify-plugin'
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client'

/**
 * The gateway's Prometheus registry and the metrics shared across folders. A folder with metrics of its
 * own (events, cluster) registers them on `app.metrics.registry`. Labels never carry a token or an id
 * a person typed: routes are the matched route pattern, not the URL.
 */
export interface GatewayMetrics {
  readonly registry: Registry
  readonly requests: Counter<'route' | 'method' | 'status'>
  readonly upstreamLatency: Histogram<'route' | 'status'>
  readonly upstreamErrors: Counter<'reason'>
  readonly authFailures: Counter<'reason'>
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: GatewayMetrics
  }
}

/** Creates a fresh registry per app so tests with several apps in one process do not collide. */
export function createMetrics(): GatewayMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  return {
    registry,
    requests: new Counter({
      name: 'krg_http_requests_total',
      help: 'Requests answered by the gateway, by matched route, method and status',
      labelNames: ['route', 'method', 'status'],
      registers: [registry],
    }),
    upstreamLatency: new Histogram({
      name: 'krg_upstream_request_duration_seconds',
      help: 'Time until the runtime answered with headers, by v1 route and status',
      labelNames: ['route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'krg_upstream_errors_total',
      help: 'Upstream failures: unreachable, timeout, token_refused, stream_dropped, stream_stalled',
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
}

/** Decorates `app.metrics` and counts every answered request by its route pattern. */
export const metricsPlugin = fp(
  async (app) => {
    const metrics = createMetrics()
    app.decorate('metrics', metrics)
    app.addHook('onResponse', async (request, reply) => {
      metrics.requests.inc({
        route: request.routeOptions.url ?? 'unmatched',
        method: request.method,
        status: String(reply.statusCode),
      })
    })
  },
  { name: 'metrics' },
)
