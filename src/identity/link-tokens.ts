import { hkdfSync, randomUUID } from 'node:crypto'
import { errors, jwtVerify, SignJWT } from 'jose'
import type { ChatAccount, ChatKind } from './chat-link-store.ts'
import type { ChatAccountNames } from './chat-links.ts'

/** What a link to connect a chat account names: the account, its names for the page, and the token's id. */
export interface LinkRequest extends ChatAccount, ChatAccountNames {
  /**
   * How the chat adapter reaches the account with the code (Teams: the user's conversation member id and the
   * service URL it came from, as the adapter encoded them); signed with the rest, so never made up.
   */
  readonly reach?: string
  /** The token's `jti`: a link is recorded once per token. */
  readonly id: string
  /** ms since epoch: when the token stops being accepted. */
  readonly expiresAt: number
}

/** Why a link token was refused (shown to the person who opened it). */
export type LinkTokenRefusal = 'expired' | 'invalid'

/** How long a link to connect a chat account may be opened after it was posted. */
export const LINK_TOKEN_TTL_S = 10 * 60
const AUDIENCE = 'krg:chat-link'
const TYPE = 'krg-chat-link+jwt'
/** The ids of each chat's workspaces and users: Slack's, and Entra's tenant and object ids (GUIDs). */
export const CHAT_ID: Readonly<Record<ChatKind, RegExp>> = {
  slack: /^[A-Z0-9]{2,32}$/,
  msteams: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
}
const NAME_MAX = 80
const REACH_MAX = 1000

/**
 * The signed, short-lived links a chat adapter posts to an unlinked user (`<base>auth/slack-link?t=`): a JWT
 * (jose, HS256) naming the chat account, valid ten minutes, keyed by GATEWAY_COOKIE_SECRET through HKDF (a
 * key of its own, so a link token can never pass for a cookie signature and the other way round). Every
 * secret of the list verifies, the first signs, so a rotation does not break links in flight; in a cluster
 * every replica opens what another signed.
 */
export class LinkTokens {
  readonly #keys: Uint8Array[]

  constructor(cookieSecrets: readonly string[]) {
    this.#keys = cookieSecrets.map(
      (secret) => new Uint8Array(hkdfSync('sha256', secret, 'kasm-runtime-gateway', 'chat-link token', 32)),
    )
    if (this.#keys.length === 0) throw new Error('link tokens need a secret')
  }

  /** A token for `account`, valid {@link LINK_TOKEN_TTL_S}. */
  sign(account: ChatAccount & ChatAccountNames & { readonly reach?: string }): Promise<string> {
    const claims: Record<string, string> = { chat: account.chat, ws: account.workspace, u: account.user }
    if (account.userName !== undefined) claims.un = account.userName.slice(0, NAME_MAX)
    if (account.workspaceName !== undefined) claims.wn = account.workspaceName.slice(0, NAME_MAX)
    if (account.reach !== undefined && account.reach.length <= REACH_MAX) claims.to = account.reach
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', typ: TYPE })
      .setAudience(AUDIENCE)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime(`${LINK_TOKEN_TTL_S}s`)
      .sign(this.#keys[0] as Uint8Array)
  }

  /** The link a token asks for, or why it is refused. */
  async verify(token: string): Promise<LinkRequest | LinkTokenRefusal> {
    if (token.length > 2048) return 'invalid'
    let expired = false
    for (const key of this.#keys) {
      try {
        const { payload, protectedHeader } = await jwtVerify(token, key, {
          algorithms: ['HS256'],
          audience: AUDIENCE,
          typ: TYPE,
          requiredClaims: ['jti', 'exp'],
        })
        const { chat, ws, u, un, wn, to, jti, exp } = payload
        if (protectedHeader.typ !== TYPE || typeof chat !== 'string' || !Object.hasOwn(CHAT_ID, chat))
          return 'invalid'
        const id = CHAT_ID[chat as ChatKind]
        if (typeof ws !== 'string' || !id.test(ws) || typeof u !== 'string' || !id.test(u)) return 'invalid'
        return {
          chat: chat as ChatKind,
          workspace: ws,
          user: u,
          ...(typeof un === 'string' ? { userName: un.slice(0, NAME_MAX) } : {}),
          ...(typeof wn === 'string' ? { workspaceName: wn.slice(0, NAME_MAX) } : {}),
          ...(typeof to === 'string' && to.length <= REACH_MAX ? { reach: to } : {}),
          id: String(jti),
          expiresAt: Number(exp) * 1000,
        }
      } catch (err) {
        // The signature verified under this key (the claims did not pass): no other key will do better.
        if (err instanceof errors.JWTExpired) expired = true
        if (err instanceof errors.JWTExpired || err instanceof errors.JWTClaimValidationFailed) break
      }
    }
    return expired ? 'expired' : 'invalid'
  }
}
