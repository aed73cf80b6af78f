import type { OperatorClaims } from '../auth/claims.ts'
import type { IdpLink } from '../auth/cookie-store.ts'

/** The chat platforms whose accounts a person can link; an adapter for another one adds its name here. */
export type ChatKind = 'slack' | 'msteams'

/**
 * An account on a chat platform: the platform, its workspace (Slack's team id, Teams' Entra tenant id) and the
 * user id there (Slack's user id, Teams' Entra object id `aadObjectId`).
 */
export interface ChatAccount {
  readonly chat: ChatKind
  readonly workspace: string
  readonly user: string
}

/** The one key of an account's link: `slack:T0123:U0456`. */
export function chatAccountKey(account: ChatAccount): string {
  return `${account.chat}:${account.workspace}:${account.user}`
}

/**
 * A chat account linked to a person: who they are at the gateway (the claims of the sign-in that linked it,
 * refreshed like a cookie session's), until when, and what ties it to the identity provider.
 */
export interface ChatLinkRecord extends OperatorClaims, ChatAccount {
  /** The chat user's handle and workspace name as the platform named them when the link was asked for. */
  readonly userName?: string
  readonly workspaceName?: string
  /** ms since epoch */
  readonly createdAt: number
  /** The link ends then (GATEWAY_SLACK_LINK_TTL_S after it was made). */
  readonly expiresAt: number
  /** `suspended`: the identity provider refused a refresh; the person must link again. */
  readonly state: 'active' | 'suspended'
  /** The sign-in that made it: its IdP session (back-channel logout), refresh time and sealed tokens. */
  readonly idp?: IdpLink
}

/**
 * Where links live: this process's memory, or Redis in cluster mode (any replica may receive the chat
 * platform's interaction). Stores do not judge expiry beyond forgetting a link once it has ended.
 */
export interface ChatLinkStore {
  /** Stores the account's link, replacing one it had. */
  put(record: ChatLinkRecord): Promise<void>
  get(key: string): Promise<ChatLinkRecord | null>
  /** Replaces an active link's identity (after a refresh); its times stay. False when it is not active. */
  update(key: string, record: ChatLinkRecord): Promise<boolean>
  /** Claims a due refresh once (as CookieSessionStore.claimRefresh): `idp.refreshAt` moves to now + lease. */
  claimRefresh(key: string, now: number, leaseMs: number): Promise<boolean>
  /** Marks the link suspended; false when it was not active. */
  suspend(key: string): Promise<boolean>
  /** Removes the link; resolves what was removed, or null. */
  remove(key: string): Promise<ChatLinkRecord | null>
  /** Removes every link of a person; resolves how many. */
  removeOf(sub: string): Promise<number>
  /** Removes every link made in the IdP session `sid` of issuer `iss`; resolves how many. */
  removeIdpSession(iss: string, sid: string): Promise<number>
  /**
   * Removes every link of `sub` made through issuer `iss` before `signedInBefore` (epoch ms): a back-channel
   * logout naming only the person. Resolves how many.
   */
  removeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number>
  /** Links that have not ended, soonest end first, at most `limit`. */
  list(limit: number): Promise<ChatLinkRecord[]>
  /** A person's links that have not ended. */
  listOf(sub: string): Promise<ChatLinkRecord[]>
  close(): Promise<void>
}

/** {@link ChatLinkStore} of one replica; ended links are swept by an unref'd timer. */
export class MemoryChatLinkStore implements ChatLinkStore {
  readonly #links = new Map<string, ChatLinkRecord>()
  readonly #sweeper: NodeJS.Timeout

  constructor(sweepMs = 60_000) {
    this.#sweeper = setInterval(() => this.#sweep(), sweepMs)
    this.#sweeper.unref()
  }

  async put(record: ChatLinkRecord): Promise<void> {
    this.#links.set(chatAccountKey(record), structuredClone(record))
  }

  async get(key: string): Promise<ChatLinkRecord | null> {
    const record = this.#live(key)
    return record === undefined ? null : structuredClone(record)
  }

  async update(key: string, record: ChatLinkRecord): Promise<boolean> {
    const stored = this.#live(key)
    if (stored?.state !== 'active') return false
    const { createdAt, expiresAt } = stored
    this.#links.set(key, { ...structuredClone(record), createdAt, expiresAt })
    return true
  }

  async claimRefresh(key: string, now: number, leaseMs: number): Promise<boolean> {
    const stored = this.#live(key)
    const due = stored?.idp?.refreshAt
    if (stored?.state !== 'active' || stored.idp === undefined || due === undefined || due > now) return false
    this.#links.set(key, { ...stored, idp: { ...stored.idp, refreshAt: now + leaseMs } })
    return true
  }

  async suspend(key: string): Promise<boolean> {
    const stored = this.#live(key)
    if (stored?.state !== 'active') return false
    this.#links.set(key, { ...stored, state: 'suspended' })
    return true
  }

  async remove(key: string): Promise<ChatLinkRecord | null> {
    const stored = this.#live(key)
    this.#links.delete(key)
    return stored ?? null
  }

  async removeOf(sub: string): Promise<number> {
    return this.#removeWhere((r) => r.sub === sub)
  }

  async removeIdpSession(iss: string, sid: string): Promise<number> {
    return this.#removeWhere((r) => r.idp?.iss === iss && r.idp.sid === sid)
  }

  async removeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    return this.#removeWhere((r) => r.sub === sub && r.idp?.iss === iss && r.createdAt < signedInBefore)
  }

  async list(limit: number): Promise<ChatLinkRecord[]> {
    this.#sweep()
    return [...this.#links.values()]
      .sort((a, b) => a.expiresAt - b.expiresAt)
      .slice(0, limit)
      .map((r) => structuredClone(r))
  }

  async listOf(sub: string): Promise<ChatLinkRecord[]> {
    this.#sweep()
    return [...this.#links.values()].filter((r) => r.sub === sub).map((r) => structuredClone(r))
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    this.#links.clear()
  }

  #live(key: string): ChatLinkRecord | undefined {
    const record = this.#links.get(key)
    if (record !== undefined && record.expiresAt <= Date.now()) {
      this.#links.delete(key)
      return undefined
    }
    return record
  }

  #removeWhere(matches: (record: ChatLinkRecord) => boolean): number {
    let removed = 0
    for (const [key, record] of this.#links) {
      if (!matches(record)) continue
      this.#links.delete(key)
      if (record.expiresAt > Date.now()) removed++
    }
    return removed
  }

  #sweep(): void {
    const now = Date.now()
    for (const [key, record] of this.#links) if (record.expiresAt <= now) this.#links.delete(key)
  }
}
