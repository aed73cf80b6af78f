import { Counter, Gauge, type Registry } from 'prom-client'
import { zeroed } from '../metrics/plugin.ts'
import type { ConnectionRole, RedisClient } from './connections.ts'
import type { LiveReadReason } from './live-loop.ts'

/** Cluster-mode metrics, registered on the app's registry. Labels are fixed words, never ids. */
export interface ClusterMetrics {
  readonly connected: Gauge<'connection'>
  readonly reconnects: Counter<'connection'>
  readonly appends: Counter<'result'>
  readonly appended: Counter
  readonly read: Counter
  readonly liveReads: Counter<'reason'>
  readonly leases: Gauge
  readonly leaseChanges: Counter<'event'>
  readonly watched: Gauge
}

/** Creates the metrics; `watched` is read from the fan-out loop at scrape time. */
export function createClusterMetrics(registry: Registry, watched: () => number): ClusterMetrics {
  const registers = [registry]
  const metrics: ClusterMetrics = {
    connected: new Gauge({
      name: 'krg_redis_connected',
      help: 'Whether each fixed Redis connection of this replica is ready (1) or not (0)',
      labelNames: ['connection'],
      registers,
    }),
    reconnects: new Counter({
      name: 'krg_redis_reconnects_total',
      help: 'Reconnect attempts of each fixed Redis connection',
      labelNames: ['connection'],
      registers,
    }),
    appends: new Counter({
      name: 'krg_cluster_appends_total',
      help: 'Fenced appends to a session stream by result: stored, fenced (stale owner refused), error',
      labelNames: ['result'],
      registers,
    }),
    appended: new Counter({
      name: 'krg_cluster_entries_appended_total',
      help: 'Stream entries added by this replica (duplicates dropped by the append script not counted)',
      registers,
    }),
    read: new Counter({
      name: 'krg_cluster_entries_read_total',
      help: 'Stream entries the live loop received, published or read (each is framed once and offered to local viewers)',
      registers,
    }),
    liveReads: new Counter({
      name: 'krg_cluster_live_reads_total',
      help: 'Session streams read by the live loop instead of taken from their channel: join (a newly watched session), gap (a publication was missed), resync (after the live connection reconnected)',
      labelNames: ['reason'],
      registers,
    }),
    leases: new Gauge({
      name: 'krg_cluster_leases_held',
      help: 'Reader leases this replica holds (sessions whose upstream it reads)',
      registers,
    }),
    leaseChanges: new Counter({
      name: 'krg_cluster_lease_changes_total',
      help: 'Reader leases acquired, lost (expired or taken) and released by this replica',
      labelNames: ['event'],
      registers,
    }),
    watched: new Gauge({
      name: 'krg_cluster_watched_streams',
      help: 'Session streams (live channels) this replica follows for local viewers',
      registers,
      collect() {
        this.set(watched())
      },
    }),
  }
  zeroed(metrics.reconnects, 'connection', ['command', 'live', 'subscriber'] satisfies ConnectionRole[])
  zeroed(metrics.liveReads, 'reason', ['join', 'gap', 'resync'] satisfies LiveReadReason[])
  zeroed(metrics.appends, 'result', ['stored', 'fenced', 'error'])
  zeroed(metrics.leaseChanges, 'event', ['acquired', 'lost', 'released'])
  return metrics
}

/** Keeps `connected` and `reconnects` current for one connection. */
export function trackConnection(
  metrics: ClusterMetrics,
  role: ConnectionRole,
  connection: RedisClient,
): void {
  metrics.connected.set({ connection: role }, 0)
  connection.on('ready', () => metrics.connected.set({ connection: role }, 1))
  connection.on('close', () => metrics.connected.set({ connection: role }, 0))
  connection.on('reconnecting', () => metrics.reconnects.inc({ connection: role }))
}

/** `krg_degraded`: 1 while the replica serves without Redis (see docs/cluster.md, degraded mode), else 0. */
export function registerDegradedGauge(registry: Registry, degraded: () => boolean): void {
  new Gauge({
    name: 'krg_degraded',
    help: 'Whether this replica serves in degraded mode (1: Redis lost after it had been up), or not (0)',
    registers: [registry],
    collect() {
      this.set(degraded() ? 1 : 0)
    },
  })
}
