import type { OperatorClaims } from './claims.ts'

/** A cookie session as stored server-side; keyed by the SHA-256 of the cookie's id, never the id. */
export interface CookieSessionRecord extends OperatorClaims {
  /** ms since epoch */
  createdAt: number
  /** Absolute end (ms since epoch): min(creation + GATEWAY_COOKIE_TTL_S, the token's `exp`). */
  expiresAt: number
  /** Last use (ms since epoch); the session ends GATEWAY_COOKIE_IDLE_S after it. */
  lastSeenAt: number
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
  /** Revokes; resolves true when an active session was revoked. */
  revoke(idHash: string): Promise<boolean>
  /** Revokes every active session of `sub` (sign out everywhere); resolves how many. */
  revokeAllOf(sub: string): Promise<number>
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
      stored: { state: 'active', record: { ...record } },
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
      ? { state: 'active', record: { ...entry.stored.record } }
      : { ...entry.stored }
  }

  async touch(idHash: string, lastSeenAt: number): Promise<void> {
    const entry = this.#entries.get(idHash)
    if (entry?.stored.state !== 'active') return
    entry.stored.record.lastSeenAt = Math.max(entry.stored.record.lastSeenAt, lastSeenAt)
    entry.forgetAt = this.#end(entry.stored.record)
  }

  async revoke(idHash: string): Promise<boolean> {
    const entry = this.#entries.get(idHash)
    if (entry?.stored.state !== 'active') return false
    entry.stored = { state: 'revoked', revokedAt: Date.now() }
    return true
  }

  async revokeAllOf(sub: string): Promise<number> {
    let count = 0
    const now = Date.now()
    for (const entry of this.#entries.values()) {
      if (entry.stored.state === 'active' && entry.stored.record.sub === sub) {
        entry.stored = { state: 'revoked', revokedAt: now }
        count++
      }
    }
    return count
  }

  /** Forgets every entry that can no longer be valid. */
  sweep(now = Date.now()): void {
    for (const [idHash, entry] of this.#entries) if (entry.forgetAt <= now) this.#entries.delete(idHash)
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    this.#entries.clear()
  }

  #end(record: CookieSessionRecord): number {
    return Math.min(record.expiresAt, record.lastSeenAt + this.#idleMs) + this.#retainMs
  }
}
