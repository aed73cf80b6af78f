import type { CookieSessionRecord, RevocationListener } from './cookie-store.ts'

/** Options of {@link RecentCookieSessions}. */
export interface RecentCookieSessionsOptions {
  /** How long a looked-up session is answered without asking the store again (ms). */
  readonly ttlMs: number
  /** Most sessions kept; the oldest lookup goes first. */
  readonly max: number
  /** The clock (tests); default Date.now. */
  readonly now?: () => number
}

interface Entry {
  readonly record: CookieSessionRecord
  readonly fetchedAt: number
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
  readonly #entries = new Map<string, Entry>()
  readonly #o: RecentCookieSessionsOptions
  readonly #now: () => number

  constructor(options: RecentCookieSessionsOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  /** The record looked up less than `ttlMs` ago, or undefined. */
  get(idHash: string): CookieSessionRecord | undefined {
    const entry = this.#entries.get(idHash)
    if (entry === undefined) return undefined
    if (this.#now() - entry.fetchedAt < this.#o.ttlMs) return entry.record
    this.#entries.delete(idHash)
    return undefined
  }

  /** Keeps an active session as the store answered it just now. */
  set(idHash: string, record: CookieSessionRecord): void {
    this.#entries.delete(idHash)
    this.#entries.set(idHash, { record, fetchedAt: this.#now() })
    if (this.#entries.size > this.#o.max) this.#entries.delete(this.#entries.keys().next().value as string)
  }

  forget(idHash: string): void {
    this.#entries.delete(idHash)
  }

  /** Forgets every session of `sub` (sign out everywhere: the store names no hashes to this replica). */
  forgetSub(sub: string): void {
    for (const [idHash, { record }] of this.#entries) if (record.sub === sub) this.#entries.delete(idHash)
  }

  /** Forgets every session signed in through the IdP session `sid` (back-channel logout). */
  forgetIdpSession(sid: string): void {
    for (const [idHash, { record }] of this.#entries) {
      if (record.idp?.sid === sid) this.#entries.delete(idHash)
    }
  }

  /** What the store's revocation feed is told: forget those sessions, or all after a possible gap. */
  readonly listener: RevocationListener = {
    revoked: (idHashes) => {
      for (const idHash of idHashes) this.#entries.delete(idHash)
    },
    resync: () => this.#entries.clear(),
  }

  get size(): number {
    return this.#entries.size
  }
}
