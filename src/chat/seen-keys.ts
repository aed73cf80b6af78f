/**
 * Keys seen once within a window, across replicas: a chat platform's signed request (a replay is refused), a
 * link token's id (a link is recorded once). In memory on one replica, `SET NX PX` in Redis.
 */
export interface SeenKeys {
  /** True the first time `key` is offered within `ttlMs`; false after. */
  first(key: string, ttlMs: number): Promise<boolean>
}

/** {@link SeenKeys} of one replica, at most `capacity` keys (the oldest forgotten first). */
export class MemorySeenKeys implements SeenKeys {
  readonly #seen = new Map<string, number>()
  readonly #capacity: number

  constructor(capacity = 100_000) {
    this.#capacity = capacity
  }

  async first(key: string, ttlMs: number): Promise<boolean> {
    const now = Date.now()
    const until = this.#seen.get(key)
    if (until !== undefined && until > now) return false
    this.#seen.delete(key)
    this.#seen.set(key, now + ttlMs)
    for (const [k, u] of this.#seen) {
      if (this.#seen.size <= this.#capacity && u > now) break
      this.#seen.delete(k)
    }
    return true
  }
}
