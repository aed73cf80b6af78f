/**
 * A small shared record per session for state that is not in its event stream: how its runtime fares as
 * its reader sees it, and which person took which question. In memory in a single process; a Redis hash per
 * session with change notifications in a cluster (`RedisBoard`), chosen in the stores plugin.
 */
export interface SessionBoard {
  /** Every field of the session's record. */
  read(kasmId: string): Promise<ReadonlyMap<string, string>>
  /** Sets a field; with `onlyIfAbsent`, leaves an existing one and answers false. */
  set(kasmId: string, field: string, value: string, onlyIfAbsent?: boolean): Promise<boolean>
  /** Deletes a field when its value is `expected` (any value when omitted); answers whether it did. */
  delete(kasmId: string, field: string, expected?: string): Promise<boolean>
  /**
   * Calls `listener` after a change of any field, on any replica, with the session; with null when changes
   * may have been missed (Redis was away): re-read what you hold.
   */
  onChange(listener: (kasmId: string | null) => void): () => void
  /** Forgets a session's record (the session was removed). */
  drop(kasmId: string): Promise<void>
  close(): Promise<void>
}

/** The {@link SessionBoard} of a single process. */
export class MemoryBoard implements SessionBoard {
  readonly #records = new Map<string, Map<string, string>>()
  readonly #listeners = new Set<(kasmId: string | null) => void>()

  async read(kasmId: string): Promise<ReadonlyMap<string, string>> {
    return new Map(this.#records.get(kasmId))
  }

  async set(kasmId: string, field: string, value: string, onlyIfAbsent = false): Promise<boolean> {
    let record = this.#records.get(kasmId)
    if (record === undefined) {
      record = new Map()
      this.#records.set(kasmId, record)
    }
    if (onlyIfAbsent && record.has(field)) return false
    record.set(field, value)
    this.#changed(kasmId)
    return true
  }

  async delete(kasmId: string, field: string, expected?: string): Promise<boolean> {
    const record = this.#records.get(kasmId)
    const value = record?.get(field)
    if (record === undefined || value === undefined || (expected !== undefined && value !== expected))
      return false
    record.delete(field)
    if (record.size === 0) this.#records.delete(kasmId)
    this.#changed(kasmId)
    return true
  }

  onChange(listener: (kasmId: string | null) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async drop(kasmId: string): Promise<void> {
    if (this.#records.delete(kasmId)) this.#changed(kasmId)
  }

  async close(): Promise<void> {
    this.#listeners.clear()
  }

  #changed(kasmId: string): void {
    // After the write has returned, as a notification from Redis would arrive.
    queueMicrotask(() => {
      for (const listener of this.#listeners) listener(kasmId)
    })
  }
}
