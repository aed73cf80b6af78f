import type { NotificationType } from './notification.ts'

/**
 * Where a delivery stands: `sending` (an attempt may be on its way: never sent again), `retrying` (the last
 * attempt certainly failed: a new owner may resume it), `sent`, `failed` (a 4xx, a refused address, or
 * retries exhausted), `dropped` (the queue was full or the replica shut down before the first attempt).
 */
export type DeliveryStatus = 'sending' | 'retrying' | 'sent' | 'failed' | 'dropped'

/** One delivery of one notification to one target, as the admin API lists it (no URL: it may hold a key). */
export interface DeliveryRecord {
  readonly delivery: string
  readonly type: NotificationType
  readonly reminder: boolean
  readonly kasmId: string
  readonly team: string
  readonly run: string
  readonly seq: number
  /** The target's label (`<host>#<index>`, or `team:<name>#<index>`). */
  readonly target: string
  readonly status: DeliveryStatus
  readonly attempts: number
  /** The last answer's status code; null before one or after a network failure. */
  readonly httpStatus: number | null
  /** Why the last attempt failed (our words: `timeout`, `unreachable`, `http_503`), null when it did not. */
  readonly error: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

/** What the admin API asks for. */
export interface DeliveryQuery {
  readonly limit: number
  readonly kasmId?: string
  /** Only these teams' deliveries (an admin of some teams); undefined: all. */
  readonly teams?: ReadonlySet<string>
}

/**
 * The record of deliveries, written before the first attempt so that a delivery is made by one replica once:
 * in Redis in a cluster (shared, it outlives a crashed owner), in memory otherwise.
 */
export interface DeliveryLedger {
  /**
   * Records a delivery under `key` unless one is recorded there: null when this call recorded it (the caller
   * sends), else the record found (another owner, or an earlier life of this replica, had it).
   */
  claim(key: string, record: DeliveryRecord): Promise<DeliveryRecord | null>
  /** Updates a claimed delivery (its status after an attempt). */
  update(key: string, record: DeliveryRecord): Promise<void>
  /** The most recent deliveries, newest first. */
  recent(query: DeliveryQuery): Promise<DeliveryRecord[]>
}

/** Whether a record matches a query's filters. */
export function matchesQuery(record: DeliveryRecord, query: DeliveryQuery): boolean {
  if (query.kasmId !== undefined && record.kasmId !== query.kasmId) return false
  return query.teams === undefined || query.teams.has(record.team)
}

/** The deliveries of this replica, the most recent `capacity` of them (a Map keeps insertion order). */
export class MemoryDeliveryLedger implements DeliveryLedger {
  readonly capacity: number
  readonly #records = new Map<string, DeliveryRecord>()

  constructor(capacity = 10_000) {
    this.capacity = capacity
  }

  async claim(key: string, record: DeliveryRecord): Promise<DeliveryRecord | null> {
    const known = this.#records.get(key)
    if (known !== undefined) return known
    this.#records.set(key, record)
    if (this.#records.size > this.capacity) {
      const oldest = this.#records.keys().next().value
      if (oldest !== undefined) this.#records.delete(oldest)
    }
    return null
  }

  async update(key: string, record: DeliveryRecord): Promise<void> {
    if (this.#records.has(key)) this.#records.set(key, record)
  }

  async recent(query: DeliveryQuery): Promise<DeliveryRecord[]> {
    const out: DeliveryRecord[] = []
    const all = [...this.#records.values()]
    for (let i = all.length - 1; i >= 0 && out.length < query.limit; i--) {
      const record = all[i] as DeliveryRecord
      if (matchesQuery(record, query)) out.push(record)
    }
    return out
  }
}
