import { copyClaims, type OperatorClaims } from '../auth/claims.ts'
import type { IdpRefresher, IdpSignIn } from '../auth/cookie-sessions.ts'
import type { IdpTokens } from '../auth/oidc/client.ts'
import { inProcess, type Sealer } from '../auth/sealer.ts'
import { Secret } from '../sessions/secret.ts'
import {
  type ChatAccount,
  type ChatLinkRecord,
  type ChatLinkStore,
  chatAccountKey,
} from './chat-link-store.ts'

/** What a chat account's link says now. */
export type ChatLinkCheck =
  | { readonly ok: true; readonly record: ChatLinkRecord }
  | { readonly ok: false; readonly reason: 'unlinked' | 'suspended' }

/** How a refresh went (the outcome label of `krg_signin_refreshes_total`). */
export type RefreshOutcome = 'updated' | 'refused' | 'failed'

/** Lifetimes and the identity provider's refresh, as for cookie sessions. */
export interface ChatLinksOptions {
  /** GATEWAY_SLACK_LINK_TTL_S in ms. */
  readonly ttlMs: number
  /** Seals the link's IdP tokens at rest (the TokenVault in cluster mode). */
  readonly sealer?: Sealer
  /** Refreshes links made with a refresh token (absent without an IdP). */
  readonly refresher?: IdpRefresher
  /** GATEWAY_OIDC_REFRESH_S in ms. */
  readonly refreshMs?: number
  /** How long a claimed refresh may take before another use may try (default a minute). */
  readonly refreshLeaseMs?: number
  readonly onRefresh?: (outcome: RefreshOutcome, sub: string, err?: unknown) => void
}

/** The names a chat platform gives an account, shown on the link page and in the console. */
export interface ChatAccountNames {
  readonly userName?: string
  readonly workspaceName?: string
}

/**
 * Chat accounts linked to people. A link holds the person's roles and teams from the sign-in that made it,
 * refreshed like a cookie session (GATEWAY_OIDC_REFRESH_S, with the link's own refresh token); a refused
 * refresh suspends it, and it ends after its lifetime, when the person or an admin removes it, and with a
 * back-channel logout of its IdP session or the person. Unlike a cookie session, a link may sit unused for
 * days, so a use waits (up to what it can afford) for a refresh that is due rather than acting on old roles.
 */
export class ChatLinks {
  readonly #store: ChatLinkStore
  readonly #o: ChatLinksOptions
  readonly #sealer: Sealer
  /** Refreshes running, by link key: a second use waits for the same one. */
  readonly #refreshing = new Map<string, Promise<void>>()

  constructor(store: ChatLinkStore, options: ChatLinksOptions) {
    this.#store = store
    this.#o = options
    this.#sealer = options.sealer ?? inProcess
  }

  /** Links `account` to the person of `claims` (replacing a link it had), for GATEWAY_SLACK_LINK_TTL_S. */
  async link(
    account: ChatAccount & ChatAccountNames,
    claims: OperatorClaims,
    idp?: IdpSignIn,
  ): Promise<ChatLinkRecord> {
    const now = Date.now()
    const key = chatAccountKey(account)
    const record: ChatLinkRecord = {
      chat: account.chat,
      workspace: account.workspace,
      user: account.user,
      ...(account.userName === undefined ? {} : { userName: account.userName }),
      ...(account.workspaceName === undefined ? {} : { workspaceName: account.workspaceName }),
      ...copyClaims(claims),
      createdAt: now,
      expiresAt: now + this.#o.ttlMs,
      state: 'active',
      ...(idp === undefined ? {} : { idp: await this.#idpLink(key, idp.iss, idp.sid, idp.tokens, now) }),
    }
    await this.#store.put(record)
    return record
  }

  /**
   * The account's link, refreshed first when its refresh is due: the use waits up to `waitMs` for it (an
   * answer through a modal must be acknowledged within three seconds), then goes on with the link as it
   * stands while the refresh finishes; a refused refresh suspends the link for the next use.
   */
  async check(account: ChatAccount, waitMs = Number.POSITIVE_INFINITY): Promise<ChatLinkCheck> {
    const key = chatAccountKey(account)
    const record = await this.#store.get(key)
    if (record === null) return { ok: false, reason: 'unlinked' }
    if (record.state !== 'active') return { ok: false, reason: 'suspended' }
    const due = record.idp?.refreshAt
    if (due === undefined || due > Date.now() || this.#o.refresher === undefined) return { ok: true, record }
    let running = this.#refreshing.get(key)
    if (running === undefined) {
      running = this.#refresh(key, record).finally(() => this.#refreshing.delete(key))
      this.#refreshing.set(key, running)
    }
    if (!(await within(running, waitMs))) return { ok: true, record }
    const now = await this.#store.get(key)
    if (now === null) return { ok: false, reason: 'unlinked' }
    return now.state === 'active' ? { ok: true, record: now } : { ok: false, reason: 'suspended' }
  }

  /** Resolves when no refresh runs (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.#refreshing.size > 0) await Promise.allSettled([...this.#refreshing.values()])
  }

  get(key: string): Promise<ChatLinkRecord | null> {
    return this.#store.get(key)
  }

  list(limit: number): Promise<ChatLinkRecord[]> {
    return this.#store.list(limit)
  }

  listOf(sub: string): Promise<ChatLinkRecord[]> {
    return this.#store.listOf(sub)
  }

  remove(key: string): Promise<ChatLinkRecord | null> {
    return this.#store.remove(key)
  }

  removeOf(sub: string): Promise<number> {
    return this.#store.removeOf(sub)
  }

  removeIdpSession(iss: string, sid: string): Promise<number> {
    return this.#store.removeIdpSession(iss, sid)
  }

  removeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    return this.#store.removeIdpSubject(iss, sub, signedInBefore)
  }

  async #refresh(key: string, record: ChatLinkRecord): Promise<void> {
    const { refresher, onRefresh } = this.#o
    try {
      if (!(await this.#store.claimRefresh(key, Date.now(), this.#o.refreshLeaseMs ?? 60_000))) return
      const tokens = await this.#open(key, record)
      const answer = tokens === null || refresher === undefined ? 'refused' : await refresher(tokens)
      if (answer === 'refused' || answer.claims.roles.length === 0 || answer.claims.sub !== record.sub) {
        await this.#store.suspend(key)
        onRefresh?.('refused', record.sub)
        return
      }
      const iss = record.idp?.iss
      if (iss === undefined) return
      await this.#store.update(key, {
        ...record,
        ...copyClaims({ ...answer.claims, name: answer.claims.name ?? record.name }),
        idp: await this.#idpLink(key, iss, record.idp?.sid, answer.tokens, Date.now()),
      })
      onRefresh?.('updated', record.sub)
    } catch (err) {
      // The IdP or the store could not answer: the link stays as it is and is refreshed once the claim lapses.
      onRefresh?.('failed', record.sub, err)
    }
  }

  async #idpLink(key: string, iss: string, sid: string | undefined, tokens: IdpTokens, now: number) {
    const refreshes = tokens.refreshToken !== undefined && this.#o.refresher !== undefined
    return {
      iss,
      ...(sid === undefined ? {} : { sid }),
      ...(refreshes ? { refreshAt: now + (this.#o.refreshMs ?? 300_000) } : {}),
      sealedTokens: await this.#sealer.seal(`chat-link:${key}`, new Secret(JSON.stringify(tokens))),
    }
  }

  async #open(key: string, record: ChatLinkRecord): Promise<IdpTokens | null> {
    if (record.idp === undefined) return null
    const opened = await this.#sealer.open(`chat-link:${key}`, record.idp.sealedTokens)
    return JSON.parse(opened.reveal()) as IdpTokens
  }
}

/** Whether `work` finished within `ms` (it goes on either way). */
async function within(work: Promise<void>, ms: number): Promise<boolean> {
  if (!Number.isFinite(ms)) return work.then(() => true)
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([work.then(() => true as const), late])
  } finally {
    clearTimeout(timer)
  }
}
