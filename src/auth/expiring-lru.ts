/**
 * A map of at most `max` entries, each with the instant it stops being answered: the least recently used
 * entry goes first when it is full, an entry past its instant is dropped when next asked for. The bounded
 * memory of the credential caches (verified bearers, recent cookie sessions).
 */
export class ExpiringLru<V> {
  private readonly max: number
  /** The clock (tests); default Date.now, read when called (so a mocked Date is the clock too). */
  private readonly now: () => number
  readonly #entries = new Map<string, { value: V; until: number }>()

  constructor(max: number, now: () => number = () => Date.now()) {
    this.max = max
    this.now = now
  }

  /** The value while `now() < until`, marked most recently used; undefined otherwise. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    if (this.now() >= entry.until) return undefined
    // Re-inserted: the most recently used is last, the eviction takes the first.
    this.#entries.set(key, entry)
    return entry.value
  }

  /** Keeps `value` until the epoch ms `until`. */
  set(key: string, value: V, until: number): void {
    if (this.max <= 0) return
    this.#entries.delete(key)
    this.#entries.set(key, { value, until })
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
