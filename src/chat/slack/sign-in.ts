import * as oidc from 'openid-client'
import { claimAt } from '../../auth/claims.ts'
import { type IdpAnswer, OidcClient } from '../../auth/oidc/client.ts'
import type { LoginAttempts } from '../../auth/oidc/login-attempts.ts'
import type { Config } from '../../config.ts'
import { ChatLinkMismatch, SignInStateInvalid } from '../../errors.ts'
import type { ChatAccount } from '../../identity/chat-link-store.ts'

/** The claims Sign in with Slack puts in its ID token (and userinfo) for the workspace and the user. */
const TEAM_CLAIM = 'https://slack.com/team_id'
const USER_CLAIM = 'https://slack.com/user_id'

/**
 * Sign in with Slack (OpenID Connect, issuer `https://slack.com`, GATEWAY_SLACK_OIDC_ISSUER for GovSlack and
 * tests), through the same openid-client code as the gateway's own sign-in (`auth/oidc/client.ts`: discovery,
 * PKCE, state and nonce, the ID token checked against Slack's keys). It proves, in the browser confirming a
 * link, which Slack user and workspace the person is signed in to Slack as.
 */
export class SlackSignIn {
  readonly #client: OidcClient
  readonly #attempts: LoginAttempts

  constructor(client: OidcClient, attempts: LoginAttempts) {
    this.#client = client
    this.#attempts = attempts
  }

  /** Where to send the browser: Slack's authorization endpoint, bound to the pending link's `bindingHash`. */
  async begin(bindingHash: string): Promise<URL> {
    const nonce = oidc.randomNonce()
    const codeVerifier = oidc.randomPKCECodeVerifier()
    const state = await this.#attempts.start({ bindingHash, nonce, codeVerifier, returnTo: '' })
    return this.#client.authorizationUrl({ state, nonce, codeVerifier })
  }

  /** Slack's callback: the attempt (once, this browser's), the code exchanged, the account it names. */
  async complete(query: URLSearchParams, bindingHash: string): Promise<ChatAccount> {
    const state = query.get('state')
    const attempt = state === null ? null : await this.#attempts.finish(state)
    if (state === null || attempt === null)
      throw new SignInStateInvalid('it is unknown, expired (10 minutes) or used already')
    if (attempt.bindingHash !== bindingHash) throw new SignInStateInvalid('it was started in another browser')
    const answer = await this.#client.exchange(query, {
      state,
      nonce: attempt.nonce,
      codeVerifier: attempt.codeVerifier,
    })
    const workspace = claim(answer, TEAM_CLAIM)
    const user = claim(answer, USER_CLAIM)
    if (workspace === undefined || user === undefined)
      throw new ChatLinkMismatch('Slack did not say which user and workspace you are')
    return { chat: 'slack', workspace, user }
  }
}

function claim(answer: IdpAnswer, name: string): string | undefined {
  const value = claimAt(answer.idClaims, name) ?? (answer.userinfo && claimAt(answer.userinfo, name))
  return typeof value === 'string' && /^[A-Z0-9]{2,32}$/.test(value) ? value : undefined
}

/** Sign in with Slack's client, with GATEWAY_SLACK_CLIENT_ID/_SECRET; null when they are not set. */
export function slackOidcClient(config: Config): OidcClient | null {
  const { env } = config
  if (env.GATEWAY_SLACK_CLIENT_ID === undefined || env.GATEWAY_SLACK_CLIENT_SECRET === undefined) return null
  const redirectUri = `${env.GATEWAY_PUBLIC_ORIGIN ?? ''}${config.basePath}auth/slack-link/slack-callback`
  return new OidcClient({
    issuer: new URL(env.GATEWAY_SLACK_OIDC_ISSUER),
    clientId: env.GATEWAY_SLACK_CLIENT_ID,
    clientSecret: env.GATEWAY_SLACK_CLIENT_SECRET,
    scopes: 'openid',
    redirectUri,
    postLogoutRedirectUri: redirectUri,
    // Read (ID token, else userinfo) as roles and teams are read for the gateway's own IdP.
    claims: { roles: USER_CLAIM, teams: TEAM_CLAIM, groups: TEAM_CLAIM },
    groupMap: new Map(),
    refreshMs: 0,
    timeoutMs: env.GATEWAY_OIDC_TIMEOUT_MS,
    allowHttp: !config.production,
  })
}
