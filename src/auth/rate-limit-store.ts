/** What a counter answers for one request: its place in the window's count (this one included) and the ms left. */
export interface RateLimitCount {
  readonly current: number
  readonly ttl: number
}

/** Called once per request, with the count or with why there is none (then the request passes). */
export type RateLimitCallback = (error: Error | null, count?: RateLimitCount) => void

/**
 * Requests counted per key in fixed windows, each starting with its key's first request. A callback rather
 * than a promise: the memory store answers at once, and the Redis one (`cluster/rate-limit-store.ts`)
 * answers most requests from a lease without a round trip, so neither should cost every request a promise.
 */
export interface RateLimitStore {
  incr(key: string, windowMs: number, max: number, callback: RateLimitCallback): void
}

/** Past this many keys, windows that ended are forgotten (at most once a second). */
const SWEEP_AT = 1024
/** Keys kept at most (a flood of client addresses): the oldest window goes first, as in an LRU. */
const MAX_KEYS = 100_000

/** The single-replica store: one count per key in memory. */
export class MemoryRateLimitStore implements RateLimitStore {
  readonly #windows = new Map<string, { count: number; endsAt: number }>()
  #sweptAt = 0

  incr(key: string, windowMs: number, _max: number, callback: RateLimitCallback): void {
    const now = Date.now()
    let window = this.#windows.get(key)
    if (window === undefined || now >= window.endsAt) {
      if (this.#windows.size >= SWEEP_AT) this.#sweep(now)
      this.#windows.delete(key)
      if (this.#windows.size >= MAX_KEYS) this.#windows.delete(this.#windows.keys().next().value as string)
      window = { count: 0, endsAt: now + windowMs }
      this.#windows.set(key, window)
    }
    window.count++
    callback(null, { current: window.count, ttl: window.endsAt - now })
  }

  #sweep(now: number): void {
    if (now - this.#sweptAt < 1000) return
    this.#sweptAt = now
    for (const [key, window] of this.#windows) if (now >= window.endsAt) this.#windows.delete(key)
  }
}
