/** The delays a {@link ReconnectPolicy} follows (a part of the reader's timing). */
export interface ReconnectTiming {
  /** Poll interval while the runtime is not up (Kasm's proxy answers 502) and no stream was live yet. */
  readonly notUpPollMs: number
  /** Delays after a live stream dropped, one per consecutive failure; the last repeats. */
  readonly backoffMs: readonly number[]
}

/**
 * When the upstream reader connects again after an attempt failed, as the protocol advises a sidebar: poll
 * while the runtime is not up yet; once a live stream dropped, back off step by step (1, 2, 4.. 10 s) until a
 * stream is healthy again, which starts the schedule over.
 */
export class ReconnectPolicy {
  readonly #timing: ReconnectTiming
  /** Consecutive failures since the last healthy live stream (indexes `backoffMs`). */
  #failures = 0
  #backingOff = false

  constructor(timing: ReconnectTiming) {
    this.#timing = timing
  }

  /** Whether a live stream dropped since the last connection that got through: failures back off. */
  get backingOff(): boolean {
    return this.#backingOff
  }

  /** The longest step: how long a stream must live to count as healthy, and how long a bus is waited for. */
  get longestMs(): number {
    return this.#timing.backoffMs[this.#timing.backoffMs.length - 1] ?? 10_000
  }

  /** A connection got through (the runtime answered 200): the runtime is up, whatever failed before. */
  connected(): void {
    this.#backingOff = false
  }

  /** A live stream dropped or went silent, or the gateway failed on one: the next attempts back off. */
  dropped(): void {
    this.#backingOff = true
  }

  /** The stream carried events or lived long: the next drop backs off from the first step again. */
  healthy(): void {
    this.#failures = 0
  }

  /** Starts over (the token rotated, the upstream moved): the next attempt is made as the first one. */
  reset(): void {
    this.#failures = 0
    this.#backingOff = false
  }

  /** How long to wait before the next attempt: the not-up poll, or the next step of the backoff. */
  nextDelayMs(): number {
    if (!this.#backingOff) return this.#timing.notUpPollMs
    const delays = this.#timing.backoffMs
    const delay = delays[Math.min(this.#failures, delays.length - 1)] ?? this.#timing.notUpPollMs
    this.#failures++
    return delay
  }
}
