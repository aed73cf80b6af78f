/**
 * Back-channel logout tokens already acted on, each kept until it could no longer be accepted, so that one
 * token ends sessions once (OpenID Connect Back-Channel Logout 1.0, 2.6: a replay is refused). Keyed by a hash
 * of the token's issuer and `jti`. In memory on one replica, in Redis (`SET NX` with an expiry) in a cluster.
 */
export interface UsedLogoutTokens {
  /** True the first time `key` is claimed before `untilMs` (epoch ms); false while a claim of it stands. */
  claim(key: string, untilMs: number): Promise<boolean>
  /** Withdraws a claim whose logout could not be carried out, so the IdP's retry of the token is accepted. */
  release(key: string): Promise<void>
}

/** Keys a memory ledger holds by default: far more logout tokens than an IdP sends in their ten minutes. */
const MAX_KEYS = 100_000

/**
 * {@link UsedLogoutTokens} of one replica: a bounded map of key to expiry. Entries past their expiry are
 * swept when the map is full; should it still be full (an IdP sending over `max` tokens in ten minutes), the
 * entry that expires first goes, which reopens only the last moments of that token's life.
 */
export class MemoryUsedLogoutTokens implements UsedLogoutTokens {
  readonly #until = new Map<string, number>()
  readonly #max: number

  constructor(max = MAX_KEYS) {
    this.#max = max
  }

  async claim(key: string, untilMs: number): Promise<boolean> {
    const now = Date.now()
    const held = this.#until.get(key)
    if (held !== undefined && held > now) return false
    this.#until.delete(key)
    if (this.#until.size >= this.#max) this.#sweep(now)
    this.#until.set(key, untilMs)
    return true
  }

  async release(key: string): Promise<void> {
    this.#until.delete(key)
  }

  get size(): number {
    return this.#until.size
  }

  #sweep(now: number): void {
    let first: [string, number] | undefined
    for (const entry of this.#until) {
      if (entry[1] <= now) this.#until.delete(entry[0])
      else if (first === undefined || entry[1] < first[1]) first = entry
    }
    if (this.#until.size >= this.#max && first !== undefined) this.#until.delete(first[0])
  }
}
