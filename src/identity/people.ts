import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { Counter, type Registry } from 'prom-client'
import type { OperatorClaims } from '../auth/claims.ts'
import { CookieSessions, type IdpRefresher, type IdpSignIn } from '../auth/cookie-sessions.ts'
import type { CookieSessionRecord, CookieSessionStore, RevocationListener } from '../auth/cookie-store.ts'
import type { Operator } from '../auth/operator.ts'
import type { Sealer } from '../auth/sealer.ts'
import { type ChatLinkRecord, type ChatLinkStore, chatAccountKey } from './chat-link-store.ts'
import { ChatLinks, type RefreshOutcome } from './chat-links.ts'
import { Delegations } from './delegation.ts'
import { LinkTokens } from './link-tokens.ts'

/** What {@link People} is made of: the stores, the lifetimes and the identity provider's refresh. */
export interface PeopleOptions {
  readonly cookies: CookieSessionStore
  /** GATEWAY_COOKIE_TTL_S and GATEWAY_COOKIE_IDLE_S in ms. */
  readonly cookieTtlMs: number
  readonly cookieIdleMs: number
  /** How long a cookie session looked up is answered from memory (see CookieSessionsOptions.recentMs). */
  readonly recentMs: number
  /** Seals IdP tokens at rest (the TokenVault in cluster mode). */
  readonly sealer: Sealer
  /** Re-reads a person at the identity provider (absent without one). */
  readonly refresher?: IdpRefresher
  /** GATEWAY_OIDC_REFRESH_S in ms. */
  readonly refreshMs?: number
  /** Linked chat accounts, with GATEWAY_SLACK_LINK_TTL_S in ms; absent when no chat adapter is configured. */
  readonly chatLinks?: { readonly store: ChatLinkStore; readonly ttlMs: number }
  /** GATEWAY_COOKIE_SECRET (resolved): it also keys the links posted to unlinked chat users. */
  readonly cookieSecrets: readonly string[]
  readonly registry: Registry
  readonly log: FastifyBaseLogger
}

/**
 * A person's identity at the gateway, in one place: who they are (roles and teams from the latest sign-in,
 * refreshed at the identity provider), the credentials that carry it (cookie sessions, linked chat accounts)
 * and how they all end together (sign-out everywhere, back-channel logout, a refused refresh). Request
 * authentication (`auth/plugin.ts`) and the chat adapters both make their {@link Operator}s here.
 */
export class People {
  readonly sessions: CookieSessions
  /** Linked chat accounts; null when no chat adapter is configured. */
  readonly links: ChatLinks | null
  /** The signed links that connect a chat account (`auth/slack-link?t=`). */
  readonly linkTokens: LinkTokens
  readonly #delegations = new Delegations()
  readonly #linkStore: ChatLinkStore | null
  /** The recent-session cache hands out the same record for a second: so is its operator built once. */
  readonly #cookieOperators = new WeakMap<CookieSessionRecord, Operator>()

  constructor(options: PeopleOptions) {
    const refreshes = new Counter({
      name: 'krg_signin_refreshes_total',
      help: 'Refreshes at the identity provider of signed-in people (cookie sessions, chat links): updated, refused (ended or suspended), failed (kept)',
      labelNames: ['outcome'],
      registers: [options.registry],
    })
    const onRefresh =
      (what: string) =>
      (outcome: RefreshOutcome, sub: string, err?: unknown): void => {
        refreshes.inc({ outcome })
        if (outcome === 'failed') options.log.warn({ err, sub }, `${what} refresh failed; it stays`)
        else options.log.info({ sub, outcome }, `${what} refreshed at the identity provider`)
      }
    const refresh =
      options.refresher === undefined
        ? {}
        : {
            refresher: options.refresher,
            ...(options.refreshMs === undefined ? {} : { refreshMs: options.refreshMs }),
          }
    this.sessions = new CookieSessions(options.cookies, {
      ttlMs: options.cookieTtlMs,
      idleMs: options.cookieIdleMs,
      recentMs: options.recentMs,
      sealer: options.sealer,
      ...refresh,
      onRefresh: onRefresh('sign-in'),
    })
    this.#linkStore = options.chatLinks?.store ?? null
    this.links =
      options.chatLinks === undefined
        ? null
        : new ChatLinks(options.chatLinks.store, {
            ttlMs: options.chatLinks.ttlMs,
            sealer: options.sealer,
            ...refresh,
            onRefresh: onRefresh('chat link'),
          })
    this.linkTokens = new LinkTokens(options.cookieSecrets)
  }

  /** The operator of a cookie session's record (the same object while the record is). */
  fromCookie(record: CookieSessionRecord, idHash: string): Operator {
    let operator = this.#cookieOperators.get(record)
    if (operator === undefined) {
      operator = toOperator(record, 'cookie', record.expiresAt, idHash)
      this.#cookieOperators.set(record, operator)
    }
    return operator
  }

  /** The operator a linked chat account acts as: the link's person, until the link ends. */
  fromChatLink(record: ChatLinkRecord): Operator {
    return toOperator(record, record.chat, record.expiresAt, undefined, chatAccountKey(record))
  }

  /** Starts a cookie session (the caller sets the cookie): its id, record and operator. */
  async startCookieSession(claims: OperatorClaims, notAfter?: number, idp?: IdpSignIn) {
    const { id, idHash, record } = await this.sessions.create(claims, notAfter, idp)
    return { id, record, operator: toOperator(record, 'cookie', record.expiresAt, idHash) }
  }

  /** For long-lived streams: is this operator's credential still valid now? */
  async stillValid(operator: Operator): Promise<boolean> {
    if (operator.via === 'bearer') return Date.now() < operator.expiresAt
    if (operator.via === 'cookie') {
      if (operator.cookieSessionId === undefined) return false
      // An open stream is use of the session, so this refreshes its idle timer.
      return (await this.sessions.check(operator.cookieSessionId)).ok
    }
    const record = operator.chatLink === undefined ? null : await this.#linkStore?.get(operator.chatLink)
    return record?.state === 'active'
  }

  /** Ends everything of `sub`: every cookie session (sign out everywhere) and every linked chat account. */
  async revokePerson(sub: string): Promise<number> {
    const [cookies, links] = await Promise.all([this.sessions.revokeAllOf(sub), this.links?.removeOf(sub)])
    return cookies + (links ?? 0)
  }

  /** Ends what the IdP session `sid` of `iss` signed in (back-channel logout): cookie sessions, chat links. */
  async revokeIdpSession(iss: string, sid: string): Promise<number> {
    const [cookies, links] = await Promise.all([
      this.sessions.revokeIdpSession(iss, sid),
      this.links?.removeIdpSession(iss, sid),
    ])
    return cookies + (links ?? 0)
  }

  /**
   * Ends what `sub` signed in through `iss` before `signedInBefore` (a back-channel logout naming only the
   * person): cookie sessions and chat links.
   */
  async revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    const [cookies, links] = await Promise.all([
      this.sessions.revokeIdpSubject(iss, sub, signedInBefore),
      this.links?.removeIdpSubject(iss, sub, signedInBefore),
    ])
    return cookies + (links ?? 0)
  }

  /** Every cookie session revocation on every replica (see CookieSessionStore.onRevoked). */
  onCookieRevoked(listener: RevocationListener): Promise<() => void> {
    return this.sessions.onRevoked(listener)
  }

  /** A one-time credential for an in-process request acting as `operator` (see {@link Delegations}). */
  delegate(operator: Operator): string {
    return this.#delegations.mint(operator)
  }

  /** The operator an in-process request was delegated, once; undefined for every other request. */
  delegated(request: FastifyRequest): Operator | undefined {
    return this.#delegations.take(request)
  }

  /** Waits for refreshes in flight and stops hearing revocations (the stores are closed by their owners). */
  async close(): Promise<void> {
    await this.sessions.idle()
    await this.links?.idle()
    await this.sessions.close()
  }
}

/** An operator from claims, read-only, with the credential it came by. */
export function toOperator(
  claims: OperatorClaims,
  via: Operator['via'],
  expiresAt: number,
  cookieSessionId?: string,
  chatLink?: string,
): Operator {
  return {
    sub: claims.sub,
    ...(claims.name === undefined ? {} : { name: claims.name }),
    roles: new Set(claims.roles),
    teams: new Set(claims.teams),
    via,
    expiresAt,
    ...(cookieSessionId === undefined ? {} : { cookieSessionId }),
    ...(chatLink === undefined ? {} : { chatLink }),
  }
}

/** The claims an operator was built from (to start a cookie session from a bearer). */
export function toClaims(operator: Operator): OperatorClaims {
  return {
    sub: operator.sub,
    ...(operator.name === undefined ? {} : { name: operator.name }),
    roles: [...operator.roles],
    teams: [...operator.teams],
  }
}
