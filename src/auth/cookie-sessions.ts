import { randomBytes } from 'node:crypto'
import { Secret } from '../sessions/secret.ts'
import { copyClaims, type OperatorClaims } from './claims.ts'
import type { CookieSessionRecord, CookieSessionStore, RevocationListener } from './cookie-store.ts'
import { credentialDigest } from './credential-digest.ts'
import type { IdpTokens } from './oidc/client.ts'
import { RecentCookieSessions } from './recent-cookies.ts'
import { inProcess, type Sealer } from './sealer.ts'

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
  return credentialDigest(id)
}

/** What a sign-in at the identity provider adds to a new cookie session. */
export interface IdpSignIn {
  /** The issuer signed in through (the ID token's `iss`), for back-channel logout. */
  readonly iss: string
  /** The IdP session (`sid`), for back-channel logout. */
  readonly sid?: string
  readonly tokens: IdpTokens
}

/**
 * Re-reads a person at the identity provider with their refresh token: their current claims and the tokens
 * to keep, `refused` (the person is disabled, the grant revoked, or no role remains: the session ends), or
 * a throw when the IdP cannot answer now (the session stays; the refresh is tried again later).
 */
export type IdpRefresher = (
  tokens: IdpTokens,
) => Promise<{ claims: OperatorClaims; tokens: IdpTokens } | 'refused'>

/** Lifetimes of {@link CookieSessions}, and the identity provider's refresh. */
export interface CookieSessionsOptions {
  /** GATEWAY_COOKIE_TTL_S in ms. */
  ttlMs: number
  /** GATEWAY_COOKIE_IDLE_S in ms. */
  idleMs: number
  /** Seals IdP tokens at rest: the TokenVault in cluster mode; default {@link inProcess}. */
  sealer?: Sealer
  /** Refreshes sessions that came from the IdP with a refresh token (absent without an IdP). */
  refresher?: IdpRefresher
  /** GATEWAY_OIDC_REFRESH_S in ms: how often. */
  refreshMs?: number
  /** How long a claimed refresh may take before another request may try (default a minute). */
  refreshLeaseMs?: number
  /** Told how each refresh went (logs, metrics). */
  onRefresh?: (outcome: 'updated' | 'refused' | 'failed', sub: string, err?: unknown) => void
  /**
   * Answers a session looked up less than this long ago (ms) without asking the store, which records the use
   * at most that often too (see {@link RecentCookieSessions}); 0 or absent asks the store every time.
   */
  recentMs?: number
}

/** Sessions {@link CookieSessionsOptions.recentMs} keeps at most. */
const RECENT_MAX = 10_000

/**
 * Creates, checks and revokes cookie sessions over a {@link CookieSessionStore}; judges expiry itself. A session
 * made by signing in at the identity provider keeps its own lifetime (not the ID token's short `exp`); when
 * the IdP gave a refresh token, using the session after its refresh time starts a background refresh of the
 * person's roles and teams, and a refused refresh ends the session on every replica.
 */
export class CookieSessions {
  private readonly store: CookieSessionStore
  private readonly options: CookieSessionsOptions
  readonly #sealer: Sealer
  readonly #refreshing = new Set<Promise<void>>()
  readonly #recent: RecentCookieSessions | null
  /** Stops hearing revocations for {@link #recent}. */
  readonly #hearing: Promise<() => void> | null

  constructor(store: CookieSessionStore, options: CookieSessionsOptions) {
    this.store = store
    this.options = options
    this.#sealer = options.sealer ?? inProcess
    const ttlMs = options.recentMs ?? 0
    this.#recent = ttlMs > 0 ? new RecentCookieSessions({ ttlMs, max: RECENT_MAX }) : null
    // Should listening fail, a revocation elsewhere still takes effect once the entry is `recentMs` old.
    this.#hearing =
      this.#recent === null ? null : store.onRevoked(this.#recent.listener).catch(() => () => {})
  }

  /** Stops hearing revocations (the store itself is closed by its owner). */
  async close(): Promise<void> {
    ;(await this.#hearing)?.()
  }

  /**
   * Starts a session. It ends at `min(now + TTL, notAfter)`: a session made from a bearer never outlives
   * that token (pass its `exp`), so it cannot extend what the identity provider granted.
   */
  async create(
    claims: OperatorClaims,
    notAfter = Number.POSITIVE_INFINITY,
    idp?: IdpSignIn,
  ): Promise<{ id: string; idHash: string; record: CookieSessionRecord }> {
    const now = Date.now()
    const id = newSessionId()
    const idHash = hashSessionId(id)
    const record: CookieSessionRecord = {
      ...copyClaims(claims),
      createdAt: now,
      expiresAt: Math.min(now + this.options.ttlMs, notAfter),
      lastSeenAt: now,
    }
    if (idp !== undefined) {
      record.idp = {
        iss: idp.iss,
        ...(idp.sid === undefined ? {} : { sid: idp.sid }),
        ...this.#refreshTime(idp.tokens, now),
        sealedTokens: await this.#seal(idHash, idp.tokens),
      }
    }
    await this.store.create(idHash, record)
    return { id, idHash, record }
  }

  /** The IdP tokens of an active session that came from the identity provider (for RP-initiated logout). */
  async idpTokens(idHash: string): Promise<IdpTokens | null> {
    const stored = await this.store.get(idHash)
    return stored?.state === 'active' ? this.#open(idHash, stored.record) : null
  }

  async #open(idHash: string, record: CookieSessionRecord): Promise<IdpTokens | null> {
    if (record.idp === undefined) return null
    const sealed = await this.#sealer.open(`idp:${idHash}`, record.idp.sealedTokens)
    return JSON.parse(sealed.reveal()) as IdpTokens
  }

  /** Resolves when no refresh is running (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.#refreshing.size > 0) await Promise.allSettled([...this.#refreshing])
  }

  /** Checks a session by the id from the (already unsigned) cookie and records the use. */
  async resolve(id: string): Promise<CookieCheck> {
    if (!idPattern.test(id)) return { ok: false, reason: 'cookie_invalid' }
    return this.check(hashSessionId(id))
  }

  /**
   * {@link check} answered from the sessions looked up within the last `recentMs` alone, without a promise;
   * undefined when the store must be asked.
   */
  checkRecent(idHash: string): CookieCheck | undefined {
    const recent = this.#recent?.get(idHash)
    // Looked up (and its use recorded) within the last `recentMs`: only the clock can have ended it since.
    if (recent === undefined) return undefined
    return this.#judge(idHash, recent, Date.now()) ?? { ok: true, idHash, record: recent }
  }

  /** Checks a session by its id hash (for long-lived streams) and records the use. */
  async check(idHash: string): Promise<CookieCheck> {
    const recent = this.checkRecent(idHash)
    if (recent !== undefined) return recent
    const stored = await this.store.get(idHash)
    if (stored === null) return { ok: false, reason: 'cookie_invalid' }
    if (stored.state === 'revoked') return { ok: false, reason: 'cookie_revoked' }
    const { record } = stored
    const now = Date.now()
    const refused = this.#judge(idHash, record, now)
    if (refused !== undefined) return refused
    await this.store.touch(idHash, now)
    const refreshAt = record.idp?.refreshAt
    if (refreshAt !== undefined && refreshAt <= now && this.options.refresher !== undefined) {
      const running = this.#refresh(idHash, record, now).finally(() => this.#refreshing.delete(running))
      this.#refreshing.add(running)
    }
    const seen = { ...record, lastSeenAt: now }
    this.#recent?.set(idHash, seen)
    return { ok: true, idHash, record: seen }
  }

  /** The refusal for a session the clock has ended (absolute lifetime, or idle), else undefined. */
  #judge(idHash: string, record: CookieSessionRecord, now: number): CookieCheck | undefined {
    const reason =
      now >= record.expiresAt
        ? 'cookie_expired'
        : now >= record.lastSeenAt + this.options.idleMs
          ? 'cookie_idle'
          : undefined
    if (reason === undefined) return undefined
    this.#recent?.forget(idHash)
    return { ok: false, reason }
  }

  /** Claims the due refresh (one request on one replica wins), asks the IdP, and updates or ends the session. */
  async #refresh(idHash: string, record: CookieSessionRecord, now: number): Promise<void> {
    const { refresher, onRefresh } = this.options
    const link = record.idp
    if (link === undefined) return
    try {
      if (!(await this.store.claimRefresh(idHash, now, this.options.refreshLeaseMs ?? 60_000))) return
      const tokens = await this.#open(idHash, record)
      const answer = tokens === null || refresher === undefined ? 'refused' : await refresher(tokens)
      if (answer === 'refused' || answer.claims.roles.length === 0 || answer.claims.sub !== record.sub) {
        await this.store.revoke(idHash)
        this.#recent?.forget(idHash)
        onRefresh?.('refused', record.sub)
        return
      }
      const updated: CookieSessionRecord = {
        ...record,
        ...copyClaims({ ...answer.claims, name: answer.claims.name ?? record.name }),
        idp: {
          iss: link.iss,
          ...(link.sid === undefined ? {} : { sid: link.sid }),
          ...this.#refreshTime(answer.tokens, Date.now()),
          sealedTokens: await this.#seal(idHash, answer.tokens),
        },
      }
      await this.store.update(idHash, updated)
      // Here at once; other replicas read the new roles once their entry is `recentMs` old.
      this.#recent?.forget(idHash)
      onRefresh?.('updated', record.sub)
    } catch (err) {
      // The IdP or the store could not answer: the session stays, and is refreshed once the claim lapses.
      onRefresh?.('failed', record.sub, err)
    }
  }

  #refreshTime(tokens: IdpTokens, now: number): { refreshAt?: number } {
    if (tokens.refreshToken === undefined || this.options.refresher === undefined) return {}
    return { refreshAt: now + (this.options.refreshMs ?? 300_000) }
  }

  #seal(idHash: string, tokens: IdpTokens): Promise<string> {
    return this.#sealer.seal(`idp:${idHash}`, new Secret(JSON.stringify(tokens)))
  }

  // Each revocation forgets the sessions here once the store has revoked them (a lookup running meanwhile
  // may have kept one); other replicas forget them when the revocation reaches them.
  async revoke(idHash: string): Promise<boolean> {
    const revoked = await this.store.revoke(idHash)
    this.#recent?.forget(idHash)
    return revoked
  }

  /** Ends every cookie session signed in through the IdP session `sid` of `iss` (back-channel logout). */
  async revokeIdpSession(iss: string, sid: string): Promise<number> {
    const revoked = await this.store.revokeIdpSession(iss, sid)
    this.#recent?.forgetIdpSession(sid)
    return revoked
  }

  /**
   * Ends the cookie sessions of `sub` signed in through `iss` that began before `signedInBefore` (epoch ms): a
   * back-channel logout naming only the person. Sessions made from a bearer stay.
   */
  async revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    const revoked = await this.store.revokeIdpSubject(iss, sub, signedInBefore)
    // Over-forgets the person's other sessions here: they are looked up again, nothing more.
    this.#recent?.forgetSub(sub)
    return revoked
  }

  async revokeAllOf(sub: string): Promise<number> {
    const revoked = await this.store.revokeAllOf(sub)
    this.#recent?.forgetSub(sub)
    return revoked
  }

  /** Every revocation on every replica (see {@link CookieSessionStore.onRevoked}). */
  onRevoked(listener: RevocationListener): Promise<() => void> {
    return this.store.onRevoked(listener)
  }
}
