import { type AuditLog, type AuditQuery, type AuditRecord, matches } from './types.ts'

/** The last `capacity` audit records of this replica, in a ring buffer. */
export class MemoryAuditLog implements AuditLog {
  readonly #capacity: number
  readonly #records: AuditRecord[] = []
  /** Where the next record goes once the buffer is full (the oldest record). */
  #next = 0

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError('capacity must be a positive integer')
    this.#capacity = capacity
  }

  record(record: AuditRecord): void {
    if (this.#records.length < this.#capacity) {
      this.#records.push(record)
      return
    }
    this.#records[this.#next] = record
    this.#next = (this.#next + 1) % this.#capacity
  }

  async recent(query: AuditQuery): Promise<AuditRecord[]> {
    const out: AuditRecord[] = []
    const size = this.#records.length
    // The newest record sits just before #next (or at the end while the buffer is filling).
    for (let i = 1; i <= size && out.length < query.limit; i++) {
      const record = this.#records[(this.#next - i + size) % size]
      if (record !== undefined && matches(record, query)) out.push(record)
    }
    return out
  }
}
