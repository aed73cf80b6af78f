import { Counter, Gauge, type Registry } from 'prom-client'
import { zeroed } from '../metrics/plugin.ts'

/** The event path's metrics. Labels never carry a session id, a run id or anything a person typed. */
export interface EventMetrics {
  /** Viewer streams open on this replica. */
  readonly viewers: Gauge
  /** Upstream SSE connections that are live (one per watched session at most). */
  readonly upstreamStreams: Gauge
  /** Reconnects of upstream readers, by why they happened. */
  readonly reconnects: Counter<'reason'>
  /** The shared upstream error counter of app.metrics (token_refused, stream_dropped, stream_stalled..). */
  readonly upstreamErrors: Counter<'reason'>
  /** Viewers disconnected because too many bytes were queued for them. */
  readonly slowConsumers: Counter
  /** Gaps that neither the buffer nor trace.jsonl could fill. */
  readonly gapsUnfilled: Counter
  /** Events (and trace lines) over GATEWAY_EVENT_MAX_BYTES, skipped: viewers see a gap in seq. */
  readonly oversized: Counter<'source'>
  /** The shared counter of token echoes (app.upstream): an event or trace line that held the token. */
  readonly tokenEchoes: Counter<'where'>
  /** Streams' sockets by how they were had: `fast` (taken from node:http), `fallback`, `off` (see takeover.ts). */
  readonly socketTakeovers: Counter<'path'>
  /** Frames delivered to viewers; counted in a plain number on the hot path and read at scrape time. */
  countDeliveries(n: number): void
}

/** Creates the event metrics on `registry`, reusing the shared upstream error and token echo counters. */
export function createEventMetrics(
  registry: Registry,
  upstreamErrors: Counter<'reason'>,
  tokenEchoes: Counter<'where'>,
): EventMetrics {
  let delivered = 0
  let reported = 0
  new Counter({
    name: 'krg_event_deliveries_total',
    help: 'Event frames delivered to viewers (one per event per viewer)',
    registers: [registry],
    collect() {
      this.inc(delivered - reported)
      reported = delivered
    },
  })
  const reconnects = new Counter({
    name: 'krg_event_upstream_reconnects_total',
    help: 'Upstream event stream reconnects by reason: not_up, dropped, stalled, token_refused, address_refused, bad_status, new_run, rotated, bus_failed (the bus could not store what was read), internal_error (a bug of the gateway)',
    labelNames: ['reason'],
    registers: [registry],
  })
  zeroed(reconnects, 'reason', [
    'not_up',
    'dropped',
    'stalled',
    'token_refused',
    'address_refused',
    'bad_status',
    'new_run',
    'rotated',
    'bus_failed',
    'internal_error',
  ])
  const socketTakeovers = new Counter({
    name: 'krg_socket_takeovers_total',
    help: 'Event and overview streams by how their socket was had: fast (taken from node:http), fallback (node:http internals differ: more memory per viewer), off (GATEWAY_SOCKET_TAKEOVER=off)',
    labelNames: ['path'],
    registers: [registry],
  })
  zeroed(socketTakeovers, 'path', ['fast', 'fallback', 'off'])
  return {
    viewers: new Gauge({
      name: 'krg_event_viewers',
      help: 'Viewer event streams open on this replica',
      registers: [registry],
    }),
    upstreamStreams: new Gauge({
      name: 'krg_event_upstream_streams',
      help: 'Live upstream event streams (one per watched session)',
      registers: [registry],
    }),
    reconnects,
    socketTakeovers,
    upstreamErrors,
    tokenEchoes,
    slowConsumers: new Counter({
      name: 'krg_event_slow_consumers_dropped_total',
      help: 'Viewers disconnected because their queued bytes passed GATEWAY_VIEWER_MAX_QUEUED_BYTES',
      registers: [registry],
    }),
    oversized: new Counter({
      name: 'krg_event_oversize_skipped_total',
      help: 'Events over GATEWAY_EVENT_MAX_BYTES skipped (viewers see a gap in seq), by source: stream, trace',
      labelNames: ['source'],
      registers: [registry],
    }),
    gapsUnfilled: new Counter({
      name: 'krg_event_gaps_unfilled_total',
      help: 'Gaps in a run that neither the buffer nor artifacts/trace.jsonl could fill',
      registers: [registry],
    }),
    countDeliveries(n: number) {
      delivered += n
    },
  }
}
