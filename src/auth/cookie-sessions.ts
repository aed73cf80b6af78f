import { createHash, randomBytes } from 'node:crypto'
import type { OperatorClaims } from './claims.ts'
import type { CookieSessionRecord, CookieSessionStore, RevocationListener } from './cookie-store.ts'

/** Why a cookie was refused; also the `reason` label of `krg_auth_failures_total`. */
export type CookieRefusalReason = 'cookie_invalid' | 'cookie_expired' | 'cookie_idle' | 'cookie_revoked'

/** The outcome of checking a cookie session. */
export type CookieCheck =
  | { ok: true; idHash: string; record: CookieSessionRecord }
  | { ok: false; reason: CookieRefusalReason }

// 32 random bytes in base64url, no padding.
const idPattern = /^[A-Za-z0-9_-]{43}$/

/** A new opaque session id: 32 random bytes, base64url. Only the browser ever holds it. */
export function newSessionId(): string {
  return randomBytes(32).toString('base64url')
}

/** What the server stores instead of the id: its SHA-256 (base64url), so a store dump cannot sign anyone in. */
export function hashSessionId(id: string): string {
  return createHash('sha256').update(id).digest('base64url')
}

/** Lifetimes of {@link CookieSessions}. */
export interface CookieSessionsOptions {
  /** GATEWAY_COOKIE_TTL_S in ms. */
  ttlMs: number
  /** GATEWAY_COOKIE_IDLE_S in ms. */
  idleMs: number
}

/** Creates, checks and revokes cookie sessions over a {@link CookieSessionStore}; judges expiry itself. */
export class CookieSessions {
  constructor(
    private readonly store: CookieSessionStore,
    private readonly options: CookieSessionsOptions,
  ) {}

  /**
   * Starts a session. It ends at `min(now + TTL, notAfter)`: a session made from a bearer never outlives
   * that token (pass its `exp`), so it cannot extend what the identity provider granted.
   */
  async create(
    claims: OperatorClaims,
    notAfter = Number.POSITIVE_INFINITY,
  ): Promise<{ id: string; idHash: string; record: CookieSessionRecord }> {
    const now = Date.now()
    const record: CookieSessionRecord = {
      sub: claims.sub,
      ...(claims.name === undefined ? {} : { name: claims.name }),
      roles: [...claims.roles],
      teams: [...claims.teams],
      createdAt: now,
      expiresAt: Math.min(now + this.options.ttlMs, notAfter),
      lastSeenAt: now,
    }
    const id = newSessionId()
    const idHash = hashSessionId(id)
    await this.store.create(idHash, record)
    return { id, idHash, record }
  }

  /** Checks a session by the id from the (already unsigned) cookie and records the use. */
  async resolve(id: string): Promise<CookieCheck> {
    if (!idPattern.test(id)) return { ok: false, reason: 'cookie_invalid' }
    return this.check(hashSessionId(id))
  }

  /** Checks a session by its id hash (for long-lived streams) and records the use. */
  async check(idHash: string): Promise<CookieCheck> {
    const stored = await this.store.get(idHash)
    if (stored === null) return { ok: false, reason: 'cookie_invalid' }
    if (stored.state === 'revoked') return { ok: false, reason: 'cookie_revoked' }
    const { record } = stored
    const now = Date.now()
    if (now >= record.expiresAt) return { ok: false, reason: 'cookie_expired' }
    if (now >= record.lastSeenAt + this.options.idleMs) return { ok: false, reason: 'cookie_idle' }
    await this.store.touch(idHash, now)
    return { ok: true, idHash, record: { ...record, lastSeenAt: now } }
  }

  revoke(idHash: string): Promise<boolean> {
    return this.store.revoke(idHash)
  }

  revokeAllOf(sub: string): Promise<number> {
    return this.store.revokeAllOf(sub)
  }

  /** Every revocation on every replica (see {@link CookieSessionStore.onRevoked}). */
  onRevoked(listener: RevocationListener): Promise<() => void> {
    return this.store.onRevoked(listener)
  }
}
