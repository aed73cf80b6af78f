import type { FastifyBaseLogger } from 'fastify'
import type { DeliveryLedger, DeliveryRecord, DeliveryStatus } from '../notify/ledger.ts'
import type { NotifyMetrics } from '../notify/metrics.ts'
import type { Notification } from '../notify/notification.ts'
import type { ChatTarget } from '../notify/targets.ts'

/** One notification to one chat channel. */
export interface ChatJob {
  readonly key: string
  readonly delivery: string
  readonly notification: Notification
  readonly target: ChatTarget
  /** The console's view of the session. */
  readonly url: string
}

/** How a chat adapter's delivery went: `error` is the platform's code (`channel_not_found`) or ours. */
export type ChatDeliveryResult = { readonly ok: true } | { readonly ok: false; readonly error: string }

/** What {@link ChatOutbox} works with. */
export interface ChatOutboxOptions {
  /** The webhooks' ledger: a chat delivery is claimed like theirs, and listed with them. */
  readonly ledger: DeliveryLedger
  /** The adapter's work for one job (post, thread, update); it retries the platform itself. */
  readonly deliver: (job: ChatJob) => Promise<ChatDeliveryResult>
  readonly metrics: NotifyMetrics
  readonly log: FastifyBaseLogger
  /** GATEWAY_NOTIFY_RETRY_MS and _RETRY_FOR_S (ms): a ledger that cannot be reached is asked again so. */
  readonly retryMs: number
  readonly retryForMs: number
  /** Jobs held at most; beyond, new ones are dropped. Default 1000. */
  readonly maxQueued?: number
  /** True while the ledger's store is known to be away: its failures are logged at debug. */
  readonly quiet?: () => boolean
}

interface Entry {
  readonly job: ChatJob
  readonly createdAt: number
  claimAttempts: number
}

/**
 * Hands notifications to the chat adapter off the event path: `enqueue` never waits. Per channel, one job at
 * a time in the order enqueued (a question's message is posted before its reminder and its closing update
 * it). Each job is claimed in the delivery ledger first, as a webhook's is, so a replica taking a session
 * over never posts what its predecessor claimed, and the admin API lists chat deliveries beside webhooks.
 */
export class ChatOutbox {
  readonly #o: ChatOutboxOptions
  readonly #queues = new Map<string, Entry[]>()
  readonly #busy = new Set<string>()
  readonly #timers = new Set<NodeJS.Timeout>()
  #held = 0
  #closed = false

  constructor(options: ChatOutboxOptions) {
    this.#o = options
  }

  /** Jobs queued or being delivered. */
  get held(): number {
    return this.#held
  }

  /** Queues a job; false when it was dropped (full or closed). */
  enqueue(job: ChatJob): boolean {
    if (this.#closed || this.#held >= (this.#o.maxQueued ?? 1000)) {
      this.#o.metrics.dropped.inc(labels(job))
      this.#o.log.warn(
        { kasmId: job.notification.kasmId, target: job.target.label, type: job.notification.type },
        'chat notification dropped: the outbox is full or closing',
      )
      return false
    }
    this.#held++
    this.#push({ job, createdAt: Date.now(), claimAttempts: 0 })
    return true
  }

  /** Stops: nothing new starts, queued jobs are dropped; the job in flight finishes. */
  async close(): Promise<void> {
    this.#closed = true
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    for (const queue of this.#queues.values())
      for (const entry of queue) this.#o.metrics.dropped.inc(labels(entry.job))
    this.#queues.clear()
  }

  #push(entry: Entry): void {
    const label = entry.job.target.label
    const queue = this.#queues.get(label) ?? []
    queue.push(entry)
    this.#queues.set(label, queue)
    this.#pump(label)
  }

  #pump(label: string): void {
    if (this.#closed || this.#busy.has(label)) return
    const entry = this.#queues.get(label)?.shift()
    if (entry === undefined) {
      this.#queues.delete(label)
      return
    }
    this.#busy.add(label)
    void this.#run(entry)
      .catch((err: unknown) => {
        this.#o.log.error({ err, target: label }, 'chat delivery failed unexpectedly')
        this.#held--
      })
      .finally(() => {
        this.#busy.delete(label)
        this.#pump(label)
      })
  }

  async #run(entry: Entry): Promise<void> {
    const { job } = entry
    let known: DeliveryRecord | null
    try {
      known = await this.#o.ledger.claim(job.key, record(entry, 'sending', null))
    } catch (err) {
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err, kasmId: job.notification.kasmId, target: job.target.label },
        'notification ledger unavailable; trying again',
      )
      this.#later(entry)
      return
    }
    // Sent, given up, or on its way from an owner that may have died mid-call: never twice.
    if (known !== null && known.status !== 'retrying') {
      this.#held--
      return
    }
    const result = await this.#o.deliver(job)
    const status = result.ok ? 'sent' : 'failed'
    try {
      await this.#o.ledger.update(job.key, record(entry, status, result.ok ? null : result.error))
    } catch (err) {
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err, delivery: job.delivery },
        'chat delivery status not recorded',
      )
    }
    this.#o.metrics[status].inc(labels(job))
    const fields = { delivery: job.delivery, type: job.notification.type, target: job.target.label }
    if (result.ok) this.#o.log.info(fields, 'chat notification delivered')
    else this.#o.log.warn({ ...fields, error: result.error }, 'chat notification given up')
    this.#held--
  }

  /** Asks the ledger again after a backoff, within the retry window; else the job is dropped. */
  #later(entry: Entry): void {
    entry.claimAttempts++
    const delay = Math.min(5 * 60_000, this.#o.retryMs * 2 ** (entry.claimAttempts - 1))
    if (this.#closed || Date.now() + delay - entry.createdAt > this.#o.retryForMs) {
      this.#o.metrics.dropped.inc(labels(entry.job))
      this.#held--
      return
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      this.#push(entry)
    }, delay)
    timer.unref()
    this.#timers.add(timer)
  }
}

function labels(job: ChatJob): { type: string; target: string } {
  return { type: job.notification.type, target: job.target.label }
}

function record(entry: Entry, status: DeliveryStatus, error: string | null): DeliveryRecord {
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
    attempts: status === 'sending' ? 0 : 1,
    httpStatus: null,
    error,
    createdAt: new Date(entry.createdAt).toISOString(),
    updatedAt: new Date().toISOString(),
  }
}
