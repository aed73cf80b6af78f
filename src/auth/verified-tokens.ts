import type { JWTPayload } from 'jose'
import { credentialDigest as digest } from './credential-digest.ts'
import { ExpiringLru } from './expiring-lru.ts'

/** Options of {@link VerifiedTokens}. */
export interface VerifiedTokensOptions {
  /** Most tokens kept; the least recently used goes first. */
  readonly max: number
  /** GATEWAY_JWT_CLOCK_TOLERANCE_S: a token is used until `exp` plus this, as jose judges it. */
  readonly clockToleranceS: number
  /** The clock (tests); default Date.now. */
  readonly now?: () => number
}

/**
 * Bearer tokens that passed verification, by the SHA-256 of the token (the map never holds a usable
 * credential), each until its `exp` as jose would judge it: a hit is the answer verification would give
 * again, without the HMAC and the claim checks. Bounded LRU. Refused tokens are never kept, so every
 * refusal is still verified, counted and logged.
 */
export class VerifiedTokens {
  readonly #entries: ExpiringLru<JWTPayload>
  readonly #toleranceS: number

  constructor(options: VerifiedTokensOptions) {
    this.#entries = new ExpiringLru(options.max, options.now)
    this.#toleranceS = options.clockToleranceS
  }

  /** The payload of a token verified before and still within its `exp`, or undefined. */
  get(token: string): JWTPayload | undefined {
    return this.#entries.get(digest(token))
  }

  /**
   * Keeps a verified token's payload until its `exp` (seconds) plus the tolerance, or `notAfter` (epoch ms)
   * when that is sooner: keys from a JWKS can be withdrawn, so those tokens are re-verified now and then.
   */
  add(token: string, payload: JWTPayload, notAfter = Number.POSITIVE_INFINITY): void {
    if (typeof payload.exp !== 'number') return
    // jose refuses once `exp <= now - tolerance` in whole seconds: the last valid instant is below this.
    const until = Math.min((payload.exp + this.#toleranceS) * 1000, notAfter)
    this.#entries.set(digest(token), Object.freeze(payload), until)
  }

  get size(): number {
    return this.#entries.size
  }
}
