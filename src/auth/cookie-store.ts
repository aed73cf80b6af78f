import type { OperatorClaims } from './claims.ts'

/** A cookie session as stored server-side; keyed by the SHA-256 of the cookie's id, never the id. */
export interface CookieSessionRecord extends OperatorClaims {
  /** ms since epoch */
  createdAt: number
  /** Absolute end (ms since epoch): min(creation + GATEWAY_COOKIE_TTL_S, the token's `exp`). */
  expiresAt: number
  /** Last use (ms since epoch); the session ends GATEWAY_COOKIE_IDLE_S after it. */
  lastSeenAt: number
  /** Sessions started by signing in at the identity provider (OIDC): what links them to it. */
  idp?: IdpLink
}

/** What ties a cookie session to the identity provider's sign-in it came from. */
export interface IdpLink {
  /** The issuer the person signed in through: a back-channel logout ends only its own sign-ins. */
  iss: string
  /** The IdP's session (`sid` of the ID token): a back-channel logout of it ends this cookie session. */
  sid?: string
  /** When roles and teams are next refreshed (ms since epoch); absent when the IdP issued no refresh token. */
  refreshAt?: number
  /** The IdP's tokens (refresh and ID token), sealed by CookieSessions: a JWE in cluster mode. */
  sealedTokens: string
}

/**
 * Told of every revocation on every replica: the id hashes of the cookie sessions just revoked, or, after a
 * reconnection that may have missed some, `resync` (check every open stream's credential again).
 */
export interface RevocationListener {
  revoked(idHashes: readonly string[]): void
  resync(): void
}

/**
 * What a lookup finds. A revoked session leaves a tombstone (no identity, only when it was revoked) until
 * it would have ended anyway, so a revoked cookie is told apart from an unknown one in metrics and logs.
 */
export type StoredCookieSession =
  | { state: 'active'; record: CookieSessionRecord }
  | { state: 'revoked'; revokedAt: number }

/**
 * Server-side cookie session storage: in memory on one replica, in Redis in cluster mode. Stores do not
 * judge expiry (the caller does, with the record's times); they may forget an entry once it can no longer
 * be valid, after `min(expiresAt, lastSeenAt + idleMs)` (a grace period after that keeps the refusal
 * reason, "expired" rather than "unknown", in metrics and logs).
 */
export interface CookieSessionStore {
  create(idHash: string, record: CookieSessionRecord): Promise<void>
  get(idHash: string): Promise<StoredCookieSession | null>
  /** Records a use; a no-op for an unknown or revoked session. */
  touch(idHash: string, lastSeenAt: number): Promise<void>
  /**
   * Replaces an active session's identity (roles, teams, name, IdP link, after a refresh at the IdP); its
   * times stay as stored. Resolves false (and changes nothing) when the session is not active.
   */
  update(idHash: string, record: CookieSessionRecord): Promise<boolean>
  /**
   * Claims the session's due refresh: true, once, when it is active and `idp.refreshAt <= now`, which then
   * moves to `now + leaseMs` so no other request or replica refreshes it meanwhile.
   */
  claimRefresh(idHash: string, now: number, leaseMs: number): Promise<boolean>
  /** Revokes; resolves true when an active session was revoked. */
  revoke(idHash: string): Promise<boolean>
  /** Revokes every active session of `sub` (sign out everywhere); resolves how many. */
  revokeAllOf(sub: string): Promise<number>
  /**
   * Revokes every active session signed in through the IdP session `sid` of issuer `iss` (back-channel
   * logout); resolves how many.
   */
  revokeIdpSession(iss: string, sid: string): Promise<number>
  /**
   * Revokes every active session of `sub` signed in through issuer `iss` that began before `signedInBefore`
   * (epoch ms): a back-channel logout naming only the person. Sessions made from a bearer have no issuer of
   * sign-in and are never among them. Resolves how many.
   */
  revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number>
  /**
   * Calls `listener` for every revocation, on this replica or (cluster mode) any other, so open event
   * streams end at once. Resolves, with the call that stops listening, once listening is in effect.
   */
  onRevoked(listener: RevocationListener): Promise<() => void>
  close(): Promise<void>
}

interface MemoryEntry {
  stored: StoredCookieSession
  /** When the entry can be forgotten (ms since epoch). */
  forgetAt: number
}

/** Options of {@link MemoryCookieStore}. */
export interface MemoryCookieStoreOptions {
  /** GATEWAY_COOKIE_IDLE_S in ms. */
  idleMs: number
  /** How often expired entries are swept; default one minute. */
  sweepMs?: number
  /** How long an ended entry is kept so its refusal reason is known; default ten minutes. */
  retainMs?: number
}

/** {@link CookieSessionStore} for a single replica; expired entries are swept by an unref'd timer. */
export class MemoryCookieStore implements CookieSessionStore {
  readonly #entries = new Map<string, MemoryEntry>()
  readonly #listeners = new Set<RevocationListener>()
  readonly #idleMs: number
  readonly #retainMs: number
  readonly #sweeper: NodeJS.Timeout

  constructor(options: MemoryCookieStoreOptions) {
    this.#idleMs = options.idleMs
    this.#retainMs = options.retainMs ?? 10 * 60_000
    this.#sweeper = setInterval(() => this.sweep(), options.sweepMs ?? 60_000)
    this.#sweeper.unref()
  }

  /** Number of entries held (active and tombstones); for tests and metrics. */
  get size(): number {
    return this.#entries.size
  }

  async create(idHash: string, record: CookieSessionRecord): Promise<void> {
    this.#entries.set(idHash, {
      stored: { state: 'active', record: structuredClone(record) },
      forgetAt: this.#end(record),
    })
  }

  async get(idHash: string): Promise<StoredCookieSession | null> {
    const entry = this.#entries.get(idHash)
    if (!entry) return null
    if (entry.forgetAt <= Date.now()) {
      this.#entries.delete(idHash)
      return null
    }
    return entry.stored.state === 'active'
      ? { state: 'active', record: structuredClone(entry.stored.record) }
      : { ...entry.stored }
  }

  async touch(idHash: string, lastSeenAt: number): Promise<void> {
    const entry = this.#entries.get(idHash)
    if (entry?.stored.state !== 'active') return
    entry.stored.record.lastSeenAt = Math.max(entry.stored.record.lastSeenAt, lastSeenAt)
    entry.forgetAt = this.#end(entry.stored.record)
  }

  async update(idHash: string, record: CookieSessionRecord): Promise<boolean> {
    const entry = this.#entries.get(idHash)
    if (entry?.stored.state !== 'active') return false
    const { createdAt, expiresAt, lastSeenAt } = entry.stored.record
    entry.stored.record = { ...structuredClone(record), createdAt, expiresAt, lastSeenAt }
    return true
  }

  async claimRefresh(idHash: string, now: number, leaseMs: number): Promise<boolean> {
    const entry = this.#entries.get(idHash)
    const idp = entry?.stored.state === 'active' ? entry.stored.record.idp : undefined
    if (idp?.refreshAt === undefined || idp.refreshAt > now) return false
    idp.refreshAt = now + leaseMs
    return true
  }

  async revoke(idHash: string): Promise<boolean> {
    if (this.#entries.get(idHash)?.stored.state !== 'active') return false
    this.#markRevoked([idHash])
    return true
  }

  async revokeAllOf(sub: string): Promise<number> {
    return this.#revokeWhere((record) => record.sub === sub)
  }

  async revokeIdpSession(iss: string, sid: string): Promise<number> {
    return this.#revokeWhere((record) => record.idp?.iss === iss && record.idp.sid === sid)
  }

  async revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    return this.#revokeWhere(
      (record) => record.sub === sub && record.idp?.iss === iss && record.createdAt < signedInBefore,
    )
  }

  async onRevoked(listener: RevocationListener): Promise<() => void> {
    this.#listeners.add(listener)
    return () => void this.#listeners.delete(listener)
  }

  /** Forgets every entry that can no longer be valid. */
  sweep(now = Date.now()): void {
    for (const [idHash, entry] of this.#entries) if (entry.forgetAt <= now) this.#entries.delete(idHash)
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    this.#entries.clear()
    this.#listeners.clear()
  }

  /** Revokes every active entry whose record matches and returns how many. */
  #revokeWhere(matches: (record: CookieSessionRecord) => boolean): number {
    const hashes: string[] = []
    for (const [idHash, entry] of this.#entries)
      if (entry.stored.state === 'active' && matches(entry.stored.record)) hashes.push(idHash)
    this.#markRevoked(hashes)
    return hashes.length
  }

  /** Leaves tombstones (no identity) and tells the listeners. */
  #markRevoked(hashes: string[]): void {
    if (hashes.length === 0) return
    const now = Date.now()
    for (const idHash of hashes) {
      const entry = this.#entries.get(idHash)
      if (entry) entry.stored = { state: 'revoked', revokedAt: now }
    }
    for (const l of this.#listeners) l.revoked(hashes)
  }

  #end(record: CookieSessionRecord): number {
    return Math.min(record.expiresAt, record.lastSeenAt + this.#idleMs) + this.#retainMs
  }
}
