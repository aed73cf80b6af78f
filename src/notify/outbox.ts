import type { FastifyBaseLogger } from 'fastify'
import { type Dispatcher, request } from 'undici'
import { isAddressRefused } from '../upstream/url-policy.ts'
import { serviceName, version } from '../version.ts'
import { renderBody } from './format.ts'
import type { DeliveryLedger, DeliveryRecord, DeliveryStatus } from './ledger.ts'
import type { NotifyMetrics } from './metrics.ts'
import type { Notification } from './notification.ts'
import { signature, timestamp } from './sign.ts'
import type { NotifyTarget } from './targets.ts'

/** One notification to one target. */
export interface OutboxJob {
  readonly key: string
  readonly delivery: string
  readonly notification: Notification
  readonly target: NotifyTarget
  /** The console's view of the session. */
  readonly url: string
}

/** What {@link Outbox} works with. */
export interface OutboxOptions {
  readonly ledger: DeliveryLedger
  /** Connections checked by the URL policy (GATEWAY_UPSTREAM_ALLOW and the default refusals). */
  readonly dispatcher: Dispatcher
  /** GATEWAY_NOTIFY_TIMEOUT_MS: one attempt, connect to the end of the answer. */
  readonly timeoutMs: number
  /** GATEWAY_NOTIFY_RETRY_MS: the first retry's delay; each next one doubles it (capped), with jitter. */
  readonly retryMs: number
  /** GATEWAY_NOTIFY_RETRY_FOR_S, in ms: no attempt starts later than this after the first. */
  readonly retryForMs: number
  readonly metrics: NotifyMetrics
  readonly log: FastifyBaseLogger
  /** Deliveries held at most (queued and waiting to retry); beyond, new ones are dropped. Default 1000. */
  readonly maxQueued?: number
  /** True while the ledger's store (Redis) is known to be away: its failures are logged at debug. */
  readonly quiet?: () => boolean
}

/** The longest wait between two attempts. */
const MAX_DELAY_MS = 5 * 60 * 1000
/** An answer body is read (and discarded) up to this much. */
const MAX_ANSWER_BYTES = 64 * 1024

/** A job with where it stands. */
interface Entry {
  readonly job: OutboxJob
  attempts: number
  createdAt: number
  /** Recorded in the ledger (by this replica, or resumed from another). */
  claimed: boolean
  /** Rendered once claimed, with the delivery's creation time: every attempt sends the same bytes. */
  body: string | null
}

type Attempt =
  | { ok: true; status: number }
  | { ok: false; retry: boolean; status: number | null; error: string }

/**
 * Sends webhook deliveries off the event path: `enqueue` never waits. Per target, one request at a time in the
 * order enqueued (a receiver sees `request.opened` before its `request.closed`); 5xx, 408, 429, timeouts and
 * unreachable targets are retried with exponential backoff and jitter for GATEWAY_NOTIFY_RETRY_FOR_S; other
 * 4xx, redirects and refused addresses are given up at once. Each delivery is claimed in the
 * {@link DeliveryLedger} before its first attempt, so it is sent by one replica once.
 */
export class Outbox {
  readonly #o: OutboxOptions
  readonly #queues = new Map<string, Entry[]>()
  readonly #busy = new Set<string>()
  readonly #timers = new Set<NodeJS.Timeout>()
  readonly #inFlight = new Set<AbortController>()
  #held = 0
  #closed = false

  constructor(options: OutboxOptions) {
    this.#o = options
  }

  /** Deliveries queued, in flight or waiting to retry. */
  get held(): number {
    return this.#held
  }

  /** Queues a delivery; false when it was dropped (the outbox is full or closed). */
  enqueue(job: OutboxJob): boolean {
    if (this.#closed || this.#held >= (this.#o.maxQueued ?? 1000)) {
      this.#o.metrics.dropped.inc(this.#labels(job))
      this.#o.log.warn(
        { kasmId: job.notification.kasmId, target: job.target.label, type: job.notification.type },
        'notification dropped: the outbox is full or closing',
      )
      return false
    }
    this.#held++
    this.#push({ job, attempts: 0, createdAt: Date.now(), claimed: false, body: null })
    return true
  }

  /** Stops: no new attempt starts, waiting retries are abandoned, attempts in flight are aborted. */
  async close(): Promise<void> {
    this.#closed = true
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    for (const controller of this.#inFlight) controller.abort()
    for (const queue of this.#queues.values())
      for (const entry of queue) this.#o.metrics.dropped.inc(this.#labels(entry.job))
    this.#queues.clear()
  }

  #labels(job: OutboxJob): { type: string; target: string } {
    return { type: job.notification.type, target: job.target.label }
  }

  #push(entry: Entry): void {
    const label = entry.job.target.label
    let queue = this.#queues.get(label)
    if (queue === undefined) {
      queue = []
      this.#queues.set(label, queue)
    }
    queue.push(entry)
    this.#pump(label)
  }

  #pump(label: string): void {
    if (this.#closed || this.#busy.has(label)) return
    const queue = this.#queues.get(label)
    const entry = queue?.shift()
    if (entry === undefined) {
      this.#queues.delete(label)
      return
    }
    this.#busy.add(label)
    void this.#run(entry)
      .catch((err: unknown) => {
        this.#o.log.error({ err, target: label }, 'notification delivery failed unexpectedly')
        this.#held--
      })
      .finally(() => {
        this.#busy.delete(label)
        this.#pump(label)
      })
  }

  async #run(entry: Entry): Promise<void> {
    const { job } = entry
    if (!entry.claimed) {
      let known: DeliveryRecord | null
      try {
        known = await this.#o.ledger.claim(job.key, this.#record(entry, 'sending', null, null))
      } catch (err) {
        // Whether it was recorded is unknown: ask again later, as for a failed attempt (nothing was sent).
        this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
          { err, kasmId: job.notification.kasmId, target: job.target.label },
          'notification ledger unavailable; trying again',
        )
        if (!this.#later(entry, 'ledger_unavailable')) {
          this.#o.metrics.dropped.inc(this.#labels(job))
          this.#held--
        }
        return
      }
      if (known !== null && known.status !== 'retrying') {
        // Sent, given up, or on its way from an owner that may have died mid-request: never twice.
        this.#o.log.debug({ delivery: job.delivery, status: known.status }, 'notification already handled')
        this.#held--
        return
      }
      if (known !== null) {
        // A previous owner's last attempt certainly failed: carry on with its count and deadline.
        entry.attempts = known.attempts
        entry.createdAt = Date.parse(known.createdAt) || entry.createdAt
      }
      entry.claimed = true
      entry.body = renderBody(job.target.format, {
        notification: job.notification,
        delivery: job.delivery,
        url: job.url,
        at: new Date(entry.createdAt).toISOString(),
        ...(job.target.routingKey === undefined ? {} : { routingKey: job.target.routingKey.reveal() }),
      })
    }
    if (entry.attempts > 0) await this.#note(entry, 'sending', null, null)
    entry.attempts++
    const result = await this.#attempt(job, entry.body ?? '')
    if (this.#closed && !result.ok) {
      this.#o.metrics.dropped.inc(this.#labels(job))
      this.#held--
      return
    }
    if (!result.ok && result.retry && this.#later(entry, result.error, result.status)) return
    const status = result.ok ? 'sent' : 'failed'
    const error = result.ok ? null : result.error
    await this.#note(entry, status, result.status, error)
    this.#o.metrics[status].inc(this.#labels(job))
    const fields = {
      delivery: job.delivery,
      type: job.notification.type,
      target: job.target.label,
      attempts: entry.attempts,
    }
    if (result.ok) this.#o.log.info(fields, 'notification delivered')
    else this.#o.log.warn({ ...fields, error }, 'notification given up')
    this.#held--
  }

  /**
   * Schedules the entry again after the backoff; false when that would start after the retry window (the
   * caller gives up). A failed attempt is recorded as `retrying`: a new owner may resume it.
   */
  #later(entry: Entry, error: string, status: number | null = null): boolean {
    const exp = Math.min(MAX_DELAY_MS, this.#o.retryMs * 2 ** Math.max(0, entry.attempts - 1))
    // Equal jitter: at least half the backoff, so retries spread without collapsing to zero.
    const delay = Math.round(exp / 2 + Math.random() * (exp / 2))
    if (Date.now() + delay - entry.createdAt > this.#o.retryForMs || this.#closed) return false
    if (entry.claimed) {
      this.#o.metrics.retried.inc(this.#labels(entry.job))
      void this.#note(entry, 'retrying', status, error)
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      this.#push(entry)
    }, delay)
    timer.unref()
    this.#timers.add(timer)
    return true
  }

  async #attempt(job: OutboxJob, body: string): Promise<Attempt> {
    // Signed again at every attempt over the same body: a retry (up to GATEWAY_NOTIFY_RETRY_FOR_S later, maybe
    // from another replica) must pass a receiver's five-minute check; the body's `delivery` dedupes it.
    const at = timestamp()
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': `${serviceName}/${version}`,
      'x-krg-delivery': job.delivery,
      'x-krg-event': job.notification.type,
      'x-krg-timestamp': at,
    }
    if (job.target.secret !== null) headers['x-krg-signature'] = signature(job.target.secret, at, body)
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error('timeout')), this.#o.timeoutMs)
    this.#inFlight.add(controller)
    try {
      const res = await request(job.target.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.#o.dispatcher,
        signal: controller.signal,
        headersTimeout: this.#o.timeoutMs,
        bodyTimeout: this.#o.timeoutMs,
      })
      await res.body.dump({ limit: MAX_ANSWER_BYTES }).catch(() => {})
      const status = res.statusCode
      if (status >= 200 && status < 300) return { ok: true, status }
      const retry = status >= 500 || status === 408 || status === 429
      return { ok: false, retry, status, error: `http_${status}` }
    } catch (err) {
      if (isAddressRefused(err)) return { ok: false, retry: false, status: null, error: 'address_refused' }
      if (this.#closed) return { ok: false, retry: false, status: null, error: 'aborted' }
      const timedOut = controller.signal.aborted || /timeout/i.test(String((err as Error)?.name ?? ''))
      return { ok: false, retry: true, status: null, error: timedOut ? 'timeout' : 'unreachable' }
    } finally {
      clearTimeout(timer)
      this.#inFlight.delete(controller)
    }
  }

  #record(
    entry: Entry,
    status: DeliveryStatus,
    httpStatus: number | null,
    error: string | null,
  ): DeliveryRecord {
    const n = entry.job.notification
    return {
      delivery: entry.job.delivery,
      type: n.type,
      reminder: n.reminder,
      kasmId: n.kasmId,
      team: n.team,
      run: n.run,
      seq: n.seq,
      target: entry.job.target.label,
      status,
      attempts: entry.attempts,
      httpStatus,
      error,
      createdAt: new Date(entry.createdAt).toISOString(),
      updatedAt: new Date().toISOString(),
    }
  }

  /** Records where a claimed delivery stands; a ledger failure is logged (the attempt's outcome stands). */
  async #note(
    entry: Entry,
    status: DeliveryStatus,
    httpStatus: number | null,
    error: string | null,
  ): Promise<void> {
    try {
      await this.#o.ledger.update(entry.job.key, this.#record(entry, status, httpStatus, error))
    } catch (err) {
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err, delivery: entry.job.delivery },
        'notification status not recorded',
      )
    }
  }
}
