/** Counts failures per key in fixed windows: this replica's memory, or Redis shared by every replica. */
export interface FailureCounter {
  /** Adds one failure for `key`; resolves the count in the current window and the ms until it resets. */
  add(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }>
}

/** Entries a memory counter holds at most; the oldest window is dropped first (addresses are unbounded). */
const MAX_KEYS = 100_000

/** {@link FailureCounter} of one replica. */
export class MemoryFailureCounter implements FailureCounter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>()

  async add(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    const now = Date.now()
    let window = this.#windows.get(key)
    if (window === undefined || window.resetAt <= now) {
      this.#windows.delete(key)
      if (this.#windows.size >= MAX_KEYS) this.#sweep(now)
      window = { count: 0, resetAt: now + windowMs }
      this.#windows.set(key, window)
    }
    window.count++
    return { count: window.count, resetInMs: window.resetAt - now }
  }

  #sweep(now: number): void {
    for (const [key, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(key)
    // Still full: forget the oldest windows (Map order is insertion order).
    for (const key of this.#windows.keys()) {
      if (this.#windows.size < MAX_KEYS) break
      this.#windows.delete(key)
    }
  }
}

/** Options of {@link AddressFailures}. */
export interface AddressFailuresOptions {
  readonly counter: FailureCounter
  /** Failures per address per window before it is refused (GATEWAY_SIGNIN_FAILURES_MAX for sign-ins). */
  readonly max: number
  /** The window, ms (GATEWAY_SIGNIN_FAILURES_WINDOW_MS for sign-ins). */
  readonly windowMs: number
  /** A counter that cannot count (Redis down) lets requests through: the limit protects, it does not authenticate. */
  readonly onCounterError: (err: unknown) => void
}

/**
 * Failed credentials per client address (the address GATEWAY_TRUST_PROXY makes of the request): sign-ins
 * (auth/plugin.ts, which refuses a limited address before its credential is even looked at), Slack's
 * request signatures (routes/slack.ts) and Teams' bearer tokens (routes/msteams.ts), which still accept a
 * valid one ({@link AddressFailures.refused}). Once an address has failed `max`
 * times in a window, {@link retryAfter} says how long it must wait. Counting is shared across replicas in
 * cluster mode; the refusal is decided locally from what the shared count said at this replica's last
 * failure, so a request with a good credential costs nothing, and an attacker spreading guesses over N
 * replicas gets at most N-1 guesses more than `max`.
 */
export class AddressFailures {
  readonly #o: AddressFailuresOptions
  readonly #blocked = new Map<string, number>()

  constructor(options: AddressFailuresOptions) {
    this.#o = options
  }

  /** Seconds until `address` may present a credential again; 0 when it may now. */
  retryAfter(address: string): number {
    const until = this.#blocked.get(address)
    if (until === undefined) return 0
    const left = until - Date.now()
    if (left <= 0) {
      this.#blocked.delete(address)
      return 0
    }
    return Math.ceil(left / 1000)
  }

  /**
   * A credential from `address` failed, at an endpoint that still checks every request (a chat platform's,
   * whose few addresses are shared by every app): resolves the seconds it must wait when it is limited already
   * (answer 429 with `Retry-After`; not counted again), else counts the failure and resolves 0 (answer 401).
   */
  async refused(address: string): Promise<number> {
    const wait = this.retryAfter(address)
    if (wait === 0) await this.failed(address)
    return wait
  }

  /** Counts one failure from `address`. */
  async failed(address: string): Promise<void> {
    let result: { count: number; resetInMs: number }
    try {
      result = await this.#o.counter.add(address, this.#o.windowMs)
    } catch (err) {
      this.#o.onCounterError(err)
      return
    }
    if (result.count < this.#o.max) return
    if (this.#blocked.size >= MAX_KEYS) this.#blocked.clear()
    this.#blocked.set(address, Date.now() + Math.max(1, result.resetInMs))
  }
}

/**
 * Failed credentials a chat platform's endpoint (Slack's Request URL, Teams' messaging endpoint) takes from
 * one address in {@link PLATFORM_FAILURE_WINDOW_MS} before its further failures are answered 429: generous,
 * since a platform's few addresses are shared by every app (another app pointed here fails every time) and a
 * valid request is never refused for them.
 */
export const PLATFORM_FAILURES_MAX = 100
/** The window of {@link PLATFORM_FAILURES_MAX}, ms. */
export const PLATFORM_FAILURE_WINDOW_MS = 5 * 60_000

/**
 * The {@link AddressFailures} of a chat platform's endpoint (see {@link PLATFORM_FAILURES_MAX}), counted in
 * `counter` (its own per platform, shared by the replicas in cluster mode); `what` names the credential in
 * the warning logged when the counter fails.
 */
export function platformFailures(
  counter: FailureCounter,
  what: string,
  log: { warn(obj: object, msg: string): void },
): AddressFailures {
  return new AddressFailures({
    counter,
    max: PLATFORM_FAILURES_MAX,
    windowMs: PLATFORM_FAILURE_WINDOW_MS,
    onCounterError: (err) => log.warn({ err }, `failed ${what} cannot be counted; not limiting`),
  })
}
