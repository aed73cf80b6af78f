import type { FastifyBaseLogger } from 'fastify'
import type { CompletedSignIn } from '../../auth/oidc/signin.ts'
import type { ChatLinks } from '../../identity/chat-links.ts'
import { CHAT_ID } from '../../identity/link-tokens.ts'

/** What {@link EntraMatch} works with. */
export interface EntraMatchOptions {
  readonly links: ChatLinks
  /** GATEWAY_TEAMS_ENTRA_ISSUER: the only issuer whose `tid`/`oid` are believed. */
  readonly issuer: string
  /** GATEWAY_TEAMS_TENANT_ID. */
  readonly tenantId: string
  readonly log: FastifyBaseLogger
}

/**
 * A person known in Teams with no link step: when the gateway's identity provider is the bot's Entra tenant,
 * each sign-in's ID token carries the tenant (`tid`) and the person's object id (`oid`), which is what Teams
 * activities carry as `from.aadObjectId`. Every such sign-in records the Teams account `msteams:<tid>:<oid>`
 * as linked to that sign-in's person (replacing the one an earlier sign-in made): its roles and teams are the
 * latest sign-in's, refreshed, suspended and ended as links are (the sign-in's own refresh token, its IdP
 * session's back-channel logout), and it is listed and removed where links are. Only ID tokens of
 * GATEWAY_TEAMS_ENTRA_ISSUER are believed, and only for the bot's own tenant: another identity provider's
 * `tid`/`oid` claims, which its users might set themselves, make nobody anybody.
 */
export class EntraMatch {
  readonly #o: EntraMatchOptions

  constructor(options: EntraMatchOptions) {
    this.#o = options
  }

  /** Records the Teams account of a sign-in, when it is the bot tenant's person; never throws. */
  async signedIn(done: Pick<CompletedSignIn, 'claims' | 'idp' | 'entra'>): Promise<boolean> {
    const tid = done.entra?.tid.toLowerCase()
    const oid = done.entra?.oid.toLowerCase()
    if (tid === undefined || oid === undefined || done.idp.iss !== this.#o.issuer) return false
    if (tid !== this.#o.tenantId.toLowerCase() || !CHAT_ID.msteams.test(oid)) return false
    try {
      await this.#o.links.link(
        { chat: 'msteams', workspace: tid, user: oid, workspaceName: 'Microsoft Entra sign-in' },
        done.claims,
        done.idp,
      )
      return true
    } catch (err) {
      this.#o.log.warn({ err, sub: done.claims.sub }, 'teams: the Entra sign-in could not be recorded')
      return false
    }
  }
}
