/**
 * A map of at most `max` entries, each with the instant it stops being answered: an entry past its instant
 * is dropped when next asked for, and the least recently used goes first when the map is full. Nearly: an
 * entry refreshed fewer than `max / 2` insertions ago keeps its place when used again, so it may go before
 * one inserted after it and not used since. The bounded memory of the credential caches (verified bearers,
 * recent cookie sessions).
 */
export class ExpiringLru<V> {
  private readonly max: number
  /** The clock (tests); default Date.now, read when called (so a mocked Date is the clock too). */
  private readonly now: () => number
  readonly #entries = new Map<string, { value: V; until: number; touched: number }>()
  /** Counts insertions and refreshes: an entry's `touched` says how far from the young end it is. */
  #clock = 0

  constructor(max: number, now: () => number = () => Date.now()) {
    this.max = max
    this.now = now
  }

  /** The value while `now() < until`, marked most recently used; undefined otherwise. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (this.now() >= entry.until) {
      this.#entries.delete(key)
      return undefined
    }
    // Re-inserted (the most recently used is last, the eviction takes the first) only once it is in the
    // older half: a hot entry is asked for on every request, and moving it each time cost a delete and a set.
    if (this.#clock - entry.touched >= this.max / 2) {
      this.#entries.delete(key)
      entry.touched = ++this.#clock
      this.#entries.set(key, entry)
    }
    return entry.value
  }

  /** Keeps `value` until the epoch ms `until`. */
  set(key: string, value: V, until: number): void {
    if (this.max <= 0) return
    this.#entries.delete(key)
    this.#entries.set(key, { value, until, touched: ++this.#clock })
    if (this.#entries.size > this.max) this.#entries.delete(this.#entries.keys().next().value as string)
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }

  /** Drops every entry whose value `matches`. */
  deleteWhere(matches: (value: V) => boolean): void {
    for (const [key, { value }] of this.#entries) if (matches(value)) this.#entries.delete(key)
  }

  clear(): void {
    this.#entries.clear()
  }

  get size(): number {
    return this.#entries.size
  }
}
