import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto'
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { OperatorClaims } from '../auth/claims.ts'
import { hashSessionId, type IdpSignIn } from '../auth/cookie-sessions.ts'
import type { LoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import type { Sealer } from '../auth/sealer.ts'
import type { SeenKeys } from '../chat/seen-keys.ts'
import { Secret } from '../sessions/secret.ts'
import type { ChatAccount, ChatKind, ChatLinkRecord } from './chat-link-store.ts'
import type { ChatLinks } from './chat-links.ts'
import { LINK_TOKEN_TTL_S, type LinkRequest } from './link-tokens.ts'

/** A link waiting for its confirmation: the account it links and who signed in to link it. */
interface PendingLink {
  readonly request: LinkRequest
  readonly claims: OperatorClaims
  readonly idp: IdpSignIn
  /** ms since epoch: when it is forgotten. */
  readonly expiresAt: number
  /** The code sent to the chat user (its hash) and the wrong ones typed so far. */
  readonly code?: { readonly hash: string; readonly tries: number }
  /** The chat user said "This is not me": nothing will be recorded. */
  readonly declined?: true
}

/** What the confirmation page shows, from the browser's (signed) cookie: nothing secret. */
export interface PendingSummary {
  /** The pending link's id (only its hash keys the stored record). */
  readonly id: string
  readonly account: ChatAccount & { readonly userName?: string; readonly workspaceName?: string }
  readonly person: { readonly sub: string; readonly name?: string }
  /** The code was sent to the chat user: the page asks for it. */
  readonly codeSent?: true
}

/** A code sent to the chat user, and what the chat adapter's message needs to say whose link it is. */
export interface LinkCode {
  /** Eight digits, shown as `1234 5678`. */
  readonly code: string
  /** What a decline names the pending link by: the hash its store key is made of (not the browser's id). */
  readonly ref: string
  readonly summary: PendingSummary
  /** How the chat adapter reaches the account (the link token's, see LinkRequest.reach). */
  readonly reach?: string
}

/** What happened to a pending link the chat user was asked about. */
export type LinkCodeState = 'waiting' | 'declined' | 'expired'

/** Why a link was not recorded. */
export type LinkRefusal =
  /** Nothing waits for this browser any more (ten minutes passed, or it was used). */
  | 'expired'
  /** The link token was used for a link already. */
  | 'used'
  /** Sign in with Slack named another Slack user or workspace than the link. */
  | 'mismatch'
  /** The chat user said "This is not me". */
  | 'declined'

/** What {@link ChatLinkFlow} works with. */
export interface ChatLinkFlowOptions {
  readonly links: ChatLinks
  /** One-time entries with a TTL (the login attempts' store): pending links wait there, sealed. */
  readonly store: LoginAttemptStore
  readonly sealer: Sealer
  readonly seen: SeenKeys
  /** Where the confirmation page is: `<base>auth/slack-link/confirm`. */
  readonly confirmPath: string
}

/** A chat adapter's way of sending a code to the chat user a link names; resolves its error code, or null. */
export interface LinkCodeSender {
  send(code: LinkCode): Promise<string | null>
}

/** Wrong codes a pending link survives; the next ends it. */
export const CODE_TRIES = 5

/**
 * Linking a chat account, after the chat adapter posted a signed link (`auth/slack-link?t=`) to an unlinked
 * user: the person signs in through the identity provider (a sign-in of its own, whose refresh token is the
 * link's), the sign-in is held here for ten minutes (sealed, in the login attempts' store) and tied to the
 * browser by a signed cookie, and a page names the chat user and workspace. Then the chat account is proven
 * in the same browser: by Sign in with Slack when it is configured, else by a one-time code the chat adapter
 * sends only to the chat user the link names (a direct message, with "This is not me" to refuse), typed on
 * the page. A link is recorded only when both sides are the same human: signed in here, and reading that
 * chat account's direct messages. A forwarded link gets its sender's code, not the reader's; a link token
 * is recorded once.
 */
export class ChatLinkFlow {
  readonly #o: ChatLinkFlowOptions
  readonly #app: FastifyInstance
  readonly #cookie: string
  readonly #attributes: CookieSerializeOptions
  readonly #senders = new Map<ChatKind, LinkCodeSender>()

  constructor(app: FastifyInstance, options: ChatLinkFlowOptions) {
    this.#app = app
    this.#o = options
    this.#cookie = app.config.cookieSecure ? '__Host-krg_chat_link' : 'krg_chat_link'
    // Lax: Sign in with Slack comes back as a cross-site top-level GET.
    this.#attributes = {
      path: '/',
      httpOnly: true,
      secure: app.config.cookieSecure,
      sameSite: 'lax',
      signed: true,
      maxAge: LINK_TOKEN_TTL_S,
    }
  }

  /** The chat adapter of `chat` sends the codes of its accounts' links. */
  setCodeSender(chat: ChatKind, sender: LinkCodeSender): void {
    this.#senders.set(chat, sender)
  }

  /** Sends `code` to the chat user its link names, through that chat's adapter; its error code, or null. */
  async sendCode(code: LinkCode): Promise<string | null> {
    const sender = this.#senders.get(code.summary.account.chat)
    return sender === undefined ? 'chat_not_configured' : sender.send(code)
  }

  /**
   * The identity provider's callback of a sign-in started to link a chat account: the sign-in is held, the
   * browser gets its cookie and goes to the confirmation page. No cookie session is started.
   */
  async signedIn(
    request: FastifyRequest,
    reply: FastifyReply,
    done: { claims: OperatorClaims; idp: IdpSignIn; chatLink: LinkRequest },
  ): Promise<FastifyReply> {
    request.auditDetail.sub = done.claims.sub
    const id = randomBytes(32).toString('base64url')
    const ttl = Math.max(
      1000,
      Math.min(LINK_TOKEN_TTL_S * 1000, done.chatLink.expiresAt - Date.now() + 60_000),
    )
    const pending: PendingLink = {
      request: done.chatLink,
      claims: done.claims,
      idp: done.idp,
      expiresAt: Date.now() + ttl,
    }
    await this.#put(this.#key(id), pending)
    const { chat, workspace, user, userName, workspaceName } = done.chatLink
    const summary: PendingSummary = {
      id,
      account: {
        chat,
        workspace,
        user,
        ...(userName === undefined ? {} : { userName }),
        ...(workspaceName === undefined ? {} : { workspaceName }),
      },
      person: { sub: done.claims.sub, ...(done.claims.name === undefined ? {} : { name: done.claims.name }) },
    }
    this.#setCookie(reply, summary)
    return reply.header('referrer-policy', 'no-referrer').redirect(this.#o.confirmPath, 303)
  }

  /** The pending link this browser holds, as its cookie says; null without a valid one. */
  pending(request: FastifyRequest): PendingSummary | null {
    const raw = request.cookies?.[this.#cookie]
    if (!raw) return null
    const unsigned = this.#app.unsignCookie(raw)
    if (!unsigned.valid || unsigned.value === null) return null
    try {
      const summary = JSON.parse(Buffer.from(unsigned.value, 'base64url').toString('utf8')) as PendingSummary
      return typeof summary.id === 'string' && typeof summary.account?.user === 'string' ? summary : null
    } catch {
      return null
    }
  }

  /** The hash a Sign in with Slack attempt is bound with: the pending link's. */
  binding(summary: PendingSummary): string {
    return hashSessionId(summary.id)
  }

  /**
   * Records the link this browser holds (taken once, whatever happens), proven by Sign in with Slack: `proof`
   * is the chat account it signed in as, and must be the one the link names.
   */
  async record(
    request: FastifyRequest,
    reply: FastifyReply,
    proof: ChatAccount,
  ): Promise<ChatLinkRecord | LinkRefusal> {
    const summary = this.pending(request)
    reply.clearCookie(this.#cookie, this.#attributes)
    if (summary === null) return 'expired'
    const pending = await this.#take(request, this.#key(summary.id))
    if (pending === null) return 'expired'
    const asked = pending.request
    if (proof.chat !== asked.chat || proof.workspace !== asked.workspace || proof.user !== asked.user)
      return 'mismatch'
    return this.#link(pending)
  }

  /**
   * A new one-time code for the link this browser holds (any earlier one stops working, and the wrong tries
   * start again), for the chat adapter to send to the chat user the link names.
   */
  async newCode(request: FastifyRequest, reply: FastifyReply): Promise<LinkCode | LinkRefusal> {
    const summary = this.pending(request)
    if (summary === null) return 'expired'
    const key = this.#key(summary.id)
    const pending = await this.#take(request, key)
    if (pending === null) return 'expired'
    if (pending.declined) return 'declined'
    const code = String(randomInt(0, 100_000_000)).padStart(8, '0')
    await this.#put(key, { ...pending, code: { hash: digest(code), tries: 0 } })
    const sent: PendingSummary = { ...summary, codeSent: true }
    this.#setCookie(reply, sent)
    const reach = pending.request.reach
    return { code, ref: hashSessionId(summary.id), summary: sent, ...(reach === undefined ? {} : { reach }) }
  }

  /**
   * Records the link this browser holds when `typed` is the code sent to the chat user; a wrong code counts
   * one of {@link CODE_TRIES} and answers how many are left. Refused when the chat user declined.
   */
  async confirmCode(
    request: FastifyRequest,
    reply: FastifyReply,
    typed: string,
  ): Promise<ChatLinkRecord | LinkRefusal | { readonly triesLeft: number }> {
    const summary = this.pending(request)
    if (summary === null) return 'expired'
    const key = this.#key(summary.id)
    const pending = await this.#take(request, key)
    if (pending === null || pending.code === undefined) return this.#ended(reply, 'expired')
    if (pending.declined) return this.#ended(reply, 'declined')
    const given = digest(typed.replace(/[\s-]/g, ''))
    if (!timingSafeEqual(Buffer.from(given), Buffer.from(pending.code.hash))) {
      const tries = pending.code.tries + 1
      if (tries >= CODE_TRIES) return this.#ended(reply, 'expired')
      await this.#put(key, { ...pending, code: { ...pending.code, tries } })
      return { triesLeft: CODE_TRIES - tries }
    }
    reply.clearCookie(this.#cookie, this.#attributes)
    return this.#link(pending)
  }

  /** Where the link this browser holds stands, once its code was sent. */
  async state(summary: PendingSummary): Promise<LinkCodeState> {
    const key = this.#key(summary.id)
    const sealed = await this.#o.store.peek(key)
    if (sealed === null) return 'expired'
    const pending = JSON.parse((await this.#o.sealer.open(key, sealed)).reveal()) as PendingLink
    return pending.declined ? 'declined' : 'waiting'
  }

  /**
   * The chat user `account` answered "This is not me" to the code of the pending link `ref` names: it is
   * marked declined (kept until it would have ended, so the page can say so) when `account` is the chat user
   * the link names; anyone else changes nothing. Resolves whose link it was, when there still is one.
   */
  async decline(
    ref: string,
    account: ChatAccount,
  ): Promise<{
    readonly outcome: 'declined' | 'mismatch'
    readonly person: PendingSummary['person']
  } | null> {
    if (!/^[A-Za-z0-9_-]{20,100}$/.test(ref)) return null
    const key = `chat-link:${ref}`
    // Taken while it is changed, as every step does: a step at the same time finds nothing, never half.
    const sealed = await this.#o.store.take(key)
    if (sealed === null) return null
    const pending = JSON.parse((await this.#o.sealer.open(key, sealed)).reveal()) as PendingLink
    const asked = pending.request
    const { sub, name } = pending.claims
    const person = { sub, ...(name === undefined ? {} : { name }) }
    const theirs =
      account.chat === asked.chat && account.workspace === asked.workspace && account.user === asked.user
    await this.#put(key, theirs ? { ...pending, declined: true } : pending)
    if (!theirs) return { outcome: 'mismatch', person }
    return { outcome: 'declined', person }
  }

  async #link(pending: PendingLink): Promise<ChatLinkRecord | LinkRefusal> {
    const asked = pending.request
    if (!(await this.#o.seen.first(`chat-link-token:${asked.id}`, LINK_TOKEN_TTL_S * 2000))) return 'used'
    return this.#o.links.link(asked, pending.claims, pending.idp)
  }

  #ended(reply: FastifyReply, refusal: LinkRefusal): LinkRefusal {
    reply.clearCookie(this.#cookie, this.#attributes)
    return refusal
  }

  /** The pending link at `key`, taken (one step at a time holds it); its person goes to the audit record. */
  async #take(request: FastifyRequest, key: string): Promise<PendingLink | null> {
    const sealed = await this.#o.store.take(key)
    if (sealed === null) return null
    const pending = JSON.parse((await this.#o.sealer.open(key, sealed)).reveal()) as PendingLink
    request.auditDetail.sub = pending.claims.sub
    return pending
  }

  /** Stores `pending` sealed until it ends (nothing when it ended already). */
  async #put(key: string, pending: PendingLink): Promise<void> {
    const ttl = pending.expiresAt - Date.now()
    if (ttl <= 0) return
    await this.#o.store.put(key, await this.#o.sealer.seal(key, new Secret(JSON.stringify(pending))), ttl)
  }

  #setCookie(reply: FastifyReply, summary: PendingSummary): void {
    reply.setCookie(
      this.#cookie,
      Buffer.from(JSON.stringify(summary)).toString('base64url'),
      this.#attributes,
    )
  }

  #key(id: string): string {
    return `chat-link:${hashSessionId(id)}`
  }
}

/** A code's hash, compared in constant time (both are this length). */
function digest(code: string): string {
  return createHash('sha256').update(code).digest('base64url')
}
