/**
 * Counts occurrences of something logged at most once per interval (a refusal that may come thousands of
 * times a second), and says when a line is due and how many occurrences it covers.
 */
export class LogThrottle {
  readonly #everyMs: number
  #loggedAt = 0
  #unlogged = 0

  constructor(everyMs: number) {
    this.#everyMs = everyMs
  }

  /** One occurrence: the count since the last line (this one included) when a line is due now, else null. */
  count(now = Date.now()): number | null {
    this.#unlogged++
    if (now - this.#loggedAt < this.#everyMs) return null
    const count = this.#unlogged
    this.#loggedAt = now
    this.#unlogged = 0
    return count
  }
}
