import { randomBytes } from 'node:crypto'
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { OperatorClaims } from '../auth/claims.ts'
import { hashSessionId, type IdpSignIn } from '../auth/cookie-sessions.ts'
import type { LoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import type { Sealer } from '../auth/sealer.ts'
import type { SeenKeys } from '../chat/seen-keys.ts'
import { Secret } from '../sessions/secret.ts'
import type { ChatAccount, ChatLinkRecord } from './chat-link-store.ts'
import type { ChatLinks } from './chat-links.ts'
import { LINK_TOKEN_TTL_S, type LinkRequest } from './link-tokens.ts'

/** A link waiting for its confirmation: the account it links and who signed in to link it. */
interface PendingLink {
  readonly request: LinkRequest
  readonly claims: OperatorClaims
  readonly idp: IdpSignIn
}

/** What the confirmation page shows, from the browser's (signed) cookie: nothing secret. */
export interface PendingSummary {
  /** The pending link's id (only its hash keys the stored record). */
  readonly id: string
  readonly account: ChatAccount & { readonly userName?: string; readonly workspaceName?: string }
  readonly person: { readonly sub: string; readonly name?: string }
}

/** Why a link was not recorded. */
export type LinkRefusal =
  /** Nothing waits for this browser any more (ten minutes passed, or it was used). */
  | 'expired'
  /** The link token was used for a link already. */
  | 'used'
  /** Sign in with Slack named another Slack user or workspace than the link. */
  | 'mismatch'

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

/**
 * Linking a chat account, after the chat adapter posted a signed link (`auth/slack-link?t=`) to an unlinked
 * user: the person signs in through the identity provider (a sign-in of its own, whose refresh token is the
 * link's), the sign-in is held here for ten minutes (sealed, in the login attempts' store) and tied to the
 * browser by a signed cookie, and a page names the chat user and workspace and asks the person to confirm;
 * with Sign in with Slack configured, the chat identity is also proven in the same browser first. A link
 * token is recorded once; a forwarded link cannot bind someone else's chat account without its owner
 * confirming what the page names (and, with Sign in with Slack, signing in as them).
 */
export class ChatLinkFlow {
  readonly #o: ChatLinkFlowOptions
  readonly #app: FastifyInstance
  readonly #cookie: string
  readonly #attributes: CookieSerializeOptions

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
    const pending: PendingLink = { request: done.chatLink, claims: done.claims, idp: done.idp }
    const key = this.#key(id)
    const ttl = Math.max(
      1000,
      Math.min(LINK_TOKEN_TTL_S * 1000, done.chatLink.expiresAt - Date.now() + 60_000),
    )
    await this.#o.store.put(key, await this.#o.sealer.seal(key, new Secret(JSON.stringify(pending))), ttl)
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
    reply.setCookie(
      this.#cookie,
      Buffer.from(JSON.stringify(summary)).toString('base64url'),
      this.#attributes,
    )
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
   * Records the link this browser holds (taken once, whatever happens). `proof` is the chat account Sign in
   * with Slack signed in as; it must be the one the link names.
   */
  async record(
    request: FastifyRequest,
    reply: FastifyReply,
    proof?: ChatAccount,
  ): Promise<ChatLinkRecord | LinkRefusal> {
    const summary = this.pending(request)
    reply.clearCookie(this.#cookie, this.#attributes)
    if (summary === null) return 'expired'
    const key = this.#key(summary.id)
    const sealed = await this.#o.store.take(key)
    if (sealed === null) return 'expired'
    const pending = JSON.parse((await this.#o.sealer.open(key, sealed)).reveal()) as PendingLink
    request.auditDetail.sub = pending.claims.sub
    const asked = pending.request
    if (
      proof !== undefined &&
      (proof.chat !== asked.chat || proof.workspace !== asked.workspace || proof.user !== asked.user)
    )
      return 'mismatch'
    if (!(await this.#o.seen.first(`chat-link-token:${asked.id}`, LINK_TOKEN_TTL_S * 2000))) return 'used'
    return this.#o.links.link(asked, pending.claims, pending.idp)
  }

  #key(id: string): string {
    return `chat-link:${hashSessionId(id)}`
  }
}
