import { Counter, Gauge, type Registry } from 'prom-client'
import type { NotificationType } from './notification.ts'

/** The notification types, for the series that exist from the first scrape. */
export const NOTIFICATION_TYPES = {
  'request.opened': true,
  'request.closed': true,
  'request.claimed': true,
  'request.unclaimed': true,
  'escalation.started': true,
  'escalation.ended': true,
  'run.ended': true,
} satisfies Record<NotificationType, true>

/** Counters of webhook deliveries by `type` and `target` (a target's label; never a session id). */
export interface NotifyMetrics {
  readonly sent: Counter<'type' | 'target'>
  /** Given up: a 4xx, a refused address, or retries exhausted. */
  readonly failed: Counter<'type' | 'target'>
  /** Attempts that failed and were scheduled again (5xx, 408, 429, timeouts, unreachable). */
  readonly retried: Counter<'type' | 'target'>
  /** Never attempted: the queue was full, or the replica shut down first. */
  readonly dropped: Counter<'type' | 'target'>
  /** Deliveries queued or waiting for a retry on this replica. */
  readonly queued: Gauge
  /** Creates the series of every type for these targets at 0 (an alert on `increase` sees the first). */
  initialise(targets: readonly string[]): void
}

/** Registers the notification metrics on `registry`. */
export function createNotifyMetrics(registry: Registry, queued: () => number): NotifyMetrics {
  const counter = (name: string, help: string) =>
    new Counter({ name, help, labelNames: ['type', 'target'], registers: [registry] })
  const sent = counter(
    'krg_notifications_sent_total',
    'Webhook notifications delivered (2xx), by type and target',
  )
  const failed = counter(
    'krg_notifications_failed_total',
    'Webhook notifications given up (4xx, refused address, retries exhausted), by type and target',
  )
  const retried = counter(
    'krg_notifications_retried_total',
    'Webhook attempts that failed and were retried (5xx, timeout, unreachable), by type and target',
  )
  const dropped = counter(
    'krg_notifications_dropped_total',
    'Webhook notifications never attempted (queue full, shutdown), by type and target',
  )
  const gauge = new Gauge({
    name: 'krg_notifications_queued',
    help: 'Webhook deliveries queued or waiting for a retry on this replica',
    registers: [registry],
    collect() {
      this.set(queued())
    },
  })
  return {
    sent,
    failed,
    retried,
    dropped,
    queued: gauge,
    initialise(targets) {
      for (const target of targets)
        for (const type of Object.keys(NOTIFICATION_TYPES))
          for (const c of [sent, failed, retried, dropped]) c.inc({ type, target }, 0)
    },
  }
}
