import { credentialDigest } from './credential-digest.ts'
import { ExpiringLru } from './expiring-lru.ts'

/**
 * Signed session cookies whose signature verified and whose session was active, by the SHA-256 of the
 * signed cookie (the map never holds a usable credential), each naming its session's id hash until the
 * session's absolute expiry: a hit skips the signature's HMAC and the id's own hash. It answers only "this
 * exact cookie was signed by us": the session is still checked on every request (revoked, expired, idle),
 * and a cookie refused for any reason is forgotten, never kept. Cookies signed with an older secret are
 * not kept either, so they keep being re-signed. Bounded LRU.
 */
export class CheckedCookies {
  readonly #entries: ExpiringLru<string>

  constructor(max: number, now?: () => number) {
    this.#entries = new ExpiringLru(max, now)
  }

  /** The key of a signed cookie value. */
  digest(signed: string): string {
    return credentialDigest(signed)
  }

  /** The session id hash of a cookie checked before, or undefined. */
  get(digest: string): string | undefined {
    return this.#entries.get(digest)
  }

  /** Keeps a cookie whose signature verified and whose session was active, until the session's expiry. */
  set(digest: string, idHash: string, expiresAt: number): void {
    this.#entries.set(digest, idHash, expiresAt)
  }

  forget(digest: string): void {
    this.#entries.delete(digest)
  }
}
