import { getHeapStatistics } from 'node:v8'
import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import { Overloaded } from '../errors.ts'
import { PROBE_PATHS } from '../routes/health.ts'
import { PressureSampler } from './pressure.ts'

/** What a shed request (or a connection over the cap) is told: retry soon, here once the pressure is gone or elsewhere. */
export const RETRY_AFTER_S = 5

/** The default heap threshold: this share of V8's heap limit (which follows the container's memory). */
const HEAP_SHARE = 0.9

declare module 'fastify' {
  interface FastifyInstance {
    /** The replica's sampled pressure; null when both thresholds are 0. */
    pressure: PressureSampler | null
  }
}

/**
 * Load shedding: while the event loop's mean delay or the heap in use is over its threshold
 * (GATEWAY_OVERLOAD_LOOP_DELAY_MS, GATEWAY_OVERLOAD_HEAP_USED_BYTES), every request but the probes is answered
 * 503 `overloaded` with Retry-After before any work is done for it, event streams included, so one replica in
 * trouble does not take its viewers down with it. Counted by reason. The sampling ({@link PressureSampler})
 * cannot fail at the descriptor limit.
 */
export const loadSheddingPlugin = fp(
  async (app) => {
    const env = app.config.env
    const limits = {
      maxEventLoopDelayMs: env.GATEWAY_OVERLOAD_LOOP_DELAY_MS,
      maxHeapUsedBytes:
        env.GATEWAY_OVERLOAD_HEAP_USED_BYTES ?? Math.floor(getHeapStatistics().heap_size_limit * HEAP_SHARE),
    }
    const shed = new Counter({
      name: 'krg_requests_shed_total',
      help: 'Requests answered 503 overloaded, by the threshold passed: eventLoopDelay, heapUsedBytes',
      labelNames: ['reason'],
      registers: [app.metrics.registry],
    })
    if (limits.maxEventLoopDelayMs === 0 && limits.maxHeapUsedBytes === 0) {
      app.decorate('pressure', null)
      return
    }
    const pressure = new PressureSampler(limits)
    app.decorate('pressure', pressure)
    app.addHook('onClose', async () => pressure.stop())
    // Callback-style, as every hook each request passes.
    app.addHook('onRequest', (request, reply, done) => {
      const reason = pressure.over()
      // The balancer and Prometheus must see the replica.
      if (reason === null || PROBE_PATHS.has(request.routeOptions.url ?? '')) return done()
      shed.inc({ reason })
      reply.header('retry-after', String(RETRY_AFTER_S))
      // To the app's error handler: the one `{error, message}` shape.
      done(new Overloaded())
    })
  },
  { name: 'load-shedding', dependencies: ['metrics'] },
)
