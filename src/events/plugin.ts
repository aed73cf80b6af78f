import fp from 'fastify-plugin'
import type { EventBus, ReaderLease } from './bus.ts'
import { createEventMetrics, type EventMetrics } from './metrics.ts'
import { SessionStreams } from './session-streams.ts'
import { SocketTakeover } from './takeover.ts'
import { TraceBackfill } from './trace-backfill.ts'
import { readerTiming } from './upstream-reader.ts'

/** The event path as the routes and tests see it. */
export interface EventsService {
  readonly streams: SessionStreams
  readonly bus: EventBus
  readonly lease: ReaderLease
  readonly metrics: EventMetrics
  /** Hands a hijacked stream's socket over from node:http (GATEWAY_SOCKET_TAKEOVER). */
  readonly takeover: SocketTakeover
  /** True while the bus's store is known to be away (a Redis outage): a new stream's replay cannot be read. */
  readonly storeDown: () => boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    events: EventsService
  }
}

/**
 * Decorates `app.events`: the bus (memory, or Redis in cluster mode), one reader per watched session, and
 * the viewers. Shutdown ends every viewer stream in `preClose` (before the server waits for connections to
 * end, so clients reconnect to another replica at once), then stops the readers and frees the leases.
 */
export const eventsPlugin = fp(
  async (app) => {
    const env = app.config.env
    const dispatcherFor = app.upstream.dispatcherFor
    const metrics = createEventMetrics(
      app.metrics.registry,
      app.metrics.upstreamErrors,
      app.upstream.tokenEchoes,
    )
    const { bus, readerLease: lease, streamSlots: slots, down: storeDown } = app.stores

    const streams = new SessionStreams({
      bus,
      lease,
      slots,
      sessions: app.sessions,
      dispatcherFor,
      backfill: new TraceBackfill({
        dispatcherFor,
        maxLineBytes: env.GATEWAY_EVENT_MAX_BYTES,
        maxFillBytes: env.GATEWAY_EVENT_BUFFER_BYTES,
        onTokenEcho: (echoes) => metrics.tokenEchoes.inc({ where: 'event' }, echoes),
        onOversized: () => metrics.oversized.inc({ source: 'trace' }),
        onFault: (err) => app.log.error({ err }, 'reading a trace to fill a gap failed; gap left unfilled'),
      }),
      timing: readerTiming(env),
      limits: {
        maxQueuedBytes: env.GATEWAY_VIEWER_MAX_QUEUED_BYTES,
        maxStreamsPerOperator: env.GATEWAY_MAX_STREAMS_PER_OPERATOR,
        lingerMs: env.GATEWAY_STREAM_LINGER_MS,
        eager: env.GATEWAY_STREAM_EAGER,
        authRecheckMs: env.GATEWAY_STREAM_AUTH_RECHECK_MS,
        pingIntervalMs: env.GATEWAY_PING_INTERVAL_MS,
        leaseMs: env.GATEWAY_LEASE_MS,
        maxEventBytes: env.GATEWAY_EVENT_MAX_BYTES,
      },
      stillValid: (operator) => app.auth.stillValid(operator),
      log: app.log.child({ component: 'events' }),
      metrics,
      storeOutage: storeDown,
    })
    const takeover = new SocketTakeover(
      env.GATEWAY_SOCKET_TAKEOVER === 'on',
      metrics.socketTakeovers,
      app.log.child({ component: 'events' }),
    )
    app.decorate('events', { streams, bus, lease, metrics, takeover, storeDown })
    // A revoked cookie session (on any replica) loses its streams now, not at the next recheck.
    const stopHearing = await app.auth.onCookieRevoked({
      revoked: (idHashes) => streams.endCookieSessions(idHashes),
      resync: () => void streams.recheckCredentials(),
    })
    app.addHook('onClose', async () => stopHearing())

    if (env.GATEWAY_STREAM_EAGER) {
      app.addHook('onReady', async () => {
        // Sessions registered later are picked up by their change events.
        await streams
          .watchAll()
          .catch((err: unknown) => app.log.error({ err }, 'eager event readers failed to start'))
      })
    }
    app.addHook('preClose', () => streams.close())
  },
  { name: 'events', dependencies: ['metrics', 'sessions', 'auth', 'upstream', 'stores'] },
)
