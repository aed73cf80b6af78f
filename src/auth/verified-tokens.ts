import { createHash } from 'node:crypto'
import type { JWTPayload } from 'jose'

/** Options of {@link VerifiedTokens}. */
export interface VerifiedTokensOptions {
  /** Most tokens kept; the least recently used goes first. */
  readonly max: number
  /** GATEWAY_JWT_CLOCK_TOLERANCE_S: a token is used until `exp` plus this, as jose judges it. */
  readonly clockToleranceS: number
  /** The clock (tests); default Date.now. */
  readonly now?: () => number
}

interface Entry {
  readonly payload: JWTPayload
  /** Epoch ms after which the entry is not used (exp + tolerance, or the caller's `until`). */
  readonly until: number
}

/**
 * Bearer tokens that passed verification, by the SHA-256 of the token (the map never holds a usable
 * credential), each until its `exp` as jose would judge it: a hit is the answer verification would give
 * again, without the HMAC and the claim checks. Bounded LRU. Refused tokens are never kept, so every
 * refusal is still verified, counted and logged.
 */
export class VerifiedTokens {
  readonly #entries = new Map<string, Entry>()
  readonly #o: VerifiedTokensOptions
  readonly #now: () => number

  constructor(options: VerifiedTokensOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  /** The payload of a token verified before and still within its `exp`, or undefined. */
  get(token: string): JWTPayload | undefined {
    const key = digest(token)
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    if (this.#now() >= entry.until) return undefined
    // Re-inserted: the most recently used is last, the eviction takes the first.
    this.#entries.set(key, entry)
    return entry.payload
  }

  /**
   * Keeps a verified token's payload until its `exp` (seconds) plus the tolerance, or `notAfter` (epoch ms)
   * when that is sooner: keys from a JWKS can be withdrawn, so those tokens are re-verified now and then.
   */
  add(token: string, payload: JWTPayload, notAfter = Number.POSITIVE_INFINITY): void {
    if (typeof payload.exp !== 'number' || this.#o.max <= 0) return
    // jose refuses once `exp <= now - tolerance` in whole seconds: the last valid instant is below this.
    const until = Math.min((payload.exp + this.#o.clockToleranceS) * 1000, notAfter)
    const key = digest(token)
    this.#entries.delete(key)
    this.#entries.set(key, { payload: Object.freeze(payload), until })
    if (this.#entries.size > this.#o.max) this.#entries.delete(this.#entries.keys().next().value as string)
  }

  get size(): number {
    return this.#entries.size
  }
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64url')
}
