import type { CookieSessionRecord, RevocationListener } from './cookie-store.ts'
import { ExpiringLru } from './expiring-lru.ts'

/** Options of {@link RecentCookieSessions}. */
export interface RecentCookieSessionsOptions {
  /** How long a looked-up session is answered without asking the store again (ms). */
  readonly ttlMs: number
  /** Most sessions kept; the least recently used goes first. */
  readonly max: number
  /** The clock (tests); default Date.now. */
  readonly now?: () => number
}

/**
 * Active cookie sessions looked up in the last `ttlMs`, so a burst of requests with one cookie costs one
 * store lookup (in cluster mode, a Redis round trip) per second instead of one each. A revocation still takes
 * effect within `ttlMs` on every replica, and at once where it is heard: the revoking replica forgets the
 * session itself ({@link forget}, {@link forgetSub}, {@link forgetIdpSession}), every other one when the
 * revocation reaches it over the change feed ({@link listener}), and after a reconnection that may have missed
 * some it forgets everything. Only active sessions are kept: a refusal is always read from the store.
 */
export class RecentCookieSessions {
  readonly #entries: ExpiringLru<CookieSessionRecord>
  readonly #ttlMs: number
  readonly #now: () => number

  constructor(options: RecentCookieSessionsOptions) {
    // Read when called, like every other clock of the cookie sessions (a mocked Date included).
    this.#now = options.now ?? (() => Date.now())
    this.#entries = new ExpiringLru(options.max, this.#now)
    this.#ttlMs = options.ttlMs
  }

  /** The record looked up less than `ttlMs` ago, or undefined. */
  get(idHash: string): CookieSessionRecord | undefined {
    return this.#entries.get(idHash)
  }

  /** Keeps an active session as the store answered it just now. */
  set(idHash: string, record: CookieSessionRecord): void {
    this.#entries.set(idHash, record, this.#now() + this.#ttlMs)
  }

  forget(idHash: string): void {
    this.#entries.delete(idHash)
  }

  /** Forgets every session of `sub` (sign out everywhere: the store names no hashes to this replica). */
  forgetSub(sub: string): void {
    this.#entries.deleteWhere((record) => record.sub === sub)
  }

  /** Forgets every session signed in through the IdP session `sid` (back-channel logout). */
  forgetIdpSession(sid: string): void {
    this.#entries.deleteWhere((record) => record.idp?.sid === sid)
  }

  /** What the store's revocation feed is told: forget those sessions, or all after a possible gap. */
  readonly listener: RevocationListener = {
    revoked: (idHashes) => {
      for (const idHash of idHashes) this.#entries.delete(idHash)
    },
    resync: () => this.#entries.clear(),
  }
}
