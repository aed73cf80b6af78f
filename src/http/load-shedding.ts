import { getHeapStatistics } from 'node:v8'
import underPressure from '@fastify/under-pressure'
import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import { Overloaded } from '../errors.ts'
import { PROBE_PATHS } from '../routes/health.ts'

/** What a shed request is told: retry soon (another replica, or this one once the pressure is gone). */
const RETRY_AFTER_S = 5

/** The default heap threshold: this share of V8's heap limit (which follows the container's memory). */
const HEAP_SHARE = 0.9

/**
 * Load shedding with @fastify/under-pressure: while the event loop's mean delay or the heap in use is over
 * its threshold (GATEWAY_OVERLOAD_LOOP_DELAY_MS, GATEWAY_OVERLOAD_HEAP_USED_BYTES), every request but
 * the probes is answered 503 `overloaded` with Retry-After before any work is done for it, event streams
 * included, so one replica in trouble does not take its viewers down with it. Counted by reason.
 */
export const loadSheddingPlugin = fp(
  async (app) => {
    const env = app.config.env
    const shed = new Counter({
      name: 'krg_requests_shed_total',
      help: 'Requests answered 503 overloaded, by the threshold passed: eventLoopDelay, heapUsedBytes',
      labelNames: ['reason'],
      registers: [app.metrics.registry],
    })
    await app.register(underPressure, {
      maxEventLoopDelay: env.GATEWAY_OVERLOAD_LOOP_DELAY_MS,
      maxHeapUsedBytes:
        env.GATEWAY_OVERLOAD_HEAP_USED_BYTES ?? Math.floor(getHeapStatistics().heap_size_limit * HEAP_SHARE),
      pressureHandler: (request, reply, type) => {
        // The balancer and Prometheus must see the replica.
        if (PROBE_PATHS.has(request.routeOptions.url ?? '')) return
        shed.inc({ reason: type })
        reply.header('retry-after', String(RETRY_AFTER_S))
        // A rejection goes to the app's error handler: the one `{error, message}` shape.
        return Promise.reject(new Overloaded())
      },
    })
  },
  { name: 'load-shedding', dependencies: ['metrics'] },
)
