import * as oidc from 'openid-client'
import { LogoutTokenInvalid, NoRole, SignInStateInvalid } from '../../errors.ts'
import type { LinkRequest } from '../../identity/link-tokens.ts'
import type { OperatorClaims } from '../claims.ts'
import type { IdpRefresher, IdpSignIn } from '../cookie-sessions.ts'
import { credentialDigest } from '../credential-digest.ts'
import type { IdpTokens, LogoutToken, OidcClient } from './client.ts'
import { identityOf } from './identity.ts'
import type { LoginAttempt, LoginAttempts } from './login-attempts.ts'
import type { OidcSettings } from './settings.ts'
import type { UsedLogoutTokens } from './used-logout-tokens.ts'

/** The 403 `no_role` of a person the IdP signed in, with their `sub` for the audit record. */
export type NoRoleError = InstanceType<typeof NoRole> & { readonly sub: string }

/** A finished sign-in: who, what ties the cookie session to the IdP, and where the person goes next. */
export interface CompletedSignIn {
  readonly claims: OperatorClaims
  readonly idp: IdpSignIn
  readonly returnTo: string
  /** The chat account the sign-in links, when it was started to link one. */
  readonly chatLink?: LinkRequest
  /** The ID token's Entra tenant and object ids (`tid`, `oid`), when it carried both. */
  readonly entra?: { readonly tid: string; readonly oid: string }
}

/** Where the person was going, by the refusal of a sign-in whose attempt was known (see {@link returnToOf}). */
const returnTos = new WeakMap<object, string>()

/**
 * Where the person was going when a sign-in failed after its attempt was found (the IdP refused, the answer
 * failed a check, no role): `return_to` of that attempt. Undefined when the attempt itself was unknown.
 */
export function returnToOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? returnTos.get(err) : undefined
}

/**
 * Sign-in through the identity provider, from the first redirect to the cookie session's claims: a login
 * attempt per redirect (state, nonce, PKCE verifier, the browser binding, where to return), the callback's
 * checks in order (the attempt, the browser, then the IdP's answer), and the mapping to roles and teams.
 */
export class SignIn {
  readonly #client: OidcClient
  readonly #attempts: LoginAttempts
  readonly #settings: OidcSettings
  readonly #usedLogoutTokens: UsedLogoutTokens

  constructor(
    client: OidcClient,
    attempts: LoginAttempts,
    settings: OidcSettings,
    usedLogoutTokens: UsedLogoutTokens,
  ) {
    this.#client = client
    this.#attempts = attempts
    this.#settings = settings
    this.#usedLogoutTokens = usedLogoutTokens
  }

  /** Starts a sign-in: the IdP's authorization URL for this browser (`bindingHash`) and `returnTo`. */
  async begin(options: {
    returnTo: string
    bindingHash: string
    prompt?: 'login'
    chatLink?: LinkRequest
  }): Promise<URL> {
    const nonce = oidc.randomNonce()
    const codeVerifier = oidc.randomPKCECodeVerifier()
    const state = await this.#attempts.start({
      bindingHash: options.bindingHash,
      nonce,
      codeVerifier,
      returnTo: options.returnTo,
      ...(options.chatLink === undefined ? {} : { chatLink: options.chatLink }),
    })
    return this.#client.authorizationUrl({
      state,
      nonce,
      codeVerifier,
      ...(options.prompt === undefined ? {} : { prompt: options.prompt }),
    })
  }

  /**
   * The callback. The attempt named by `state` is consumed first (whatever happens next it cannot be used
   * again), then it must belong to this browser, then the IdP's answer is checked and exchanged. Throws the
   * gateway's sign-in errors; a person without a role gets 403 `no_role`.
   */
  async complete(query: URLSearchParams, bindingHash: string | undefined): Promise<CompletedSignIn> {
    const state = query.get('state')
    const attempt = state === null ? null : await this.#attempts.finish(state)
    if (state === null || attempt === null)
      throw new SignInStateInvalid('it is unknown, expired (10 minutes) or used already')
    return this.#finish(query, state, attempt, bindingHash).catch((err: unknown) => {
      // Whatever went wrong, "Sign in again" can still go where the person was going.
      if (typeof err === 'object' && err !== null) returnTos.set(err, attempt.returnTo)
      throw err
    })
  }

  /** The callback's checks once its attempt is known: this browser's, then the IdP's answer. */
  async #finish(
    query: URLSearchParams,
    state: string,
    attempt: LoginAttempt,
    bindingHash: string | undefined,
  ): Promise<CompletedSignIn> {
    if (bindingHash === undefined || bindingHash !== attempt.bindingHash)
      throw new SignInStateInvalid('it was started in another browser')
    const answer = await this.#client.exchange(query, {
      state,
      nonce: attempt.nonce,
      codeVerifier: attempt.codeVerifier,
    })
    const claims = identityOf(answer, this.#settings)
    if (claims.roles.length === 0) {
      const who = claims.name === undefined ? claims.sub : `${claims.name} (${claims.sub})`
      throw Object.assign(new NoRole(who), { sub: claims.sub })
    }
    const { sid, iss, tid, oid } = answer.idClaims
    const entra = typeof tid === 'string' && typeof oid === 'string' ? { tid, oid } : undefined
    return {
      claims,
      idp: {
        // openid-client checked it against the issuer discovery names.
        iss: String(iss),
        ...(typeof sid === 'string' && sid !== '' ? { sid } : {}),
        tokens: answer.tokens,
      },
      returnTo: attempt.returnTo,
      ...(attempt.chatLink === undefined ? {} : { chatLink: attempt.chatLink }),
      ...(entra === undefined ? {} : { entra }),
    }
  }

  /** For CookieSessions: the person's current roles and teams from a refresh. */
  readonly refresher: IdpRefresher = async (tokens: IdpTokens) => {
    const answer = await this.#client.refresh(tokens)
    if (answer === 'refused') return 'refused'
    return { claims: identityOf(answer, this.#settings), tokens: answer.tokens }
  }

  /** Where to send the person after signing out here (the IdP's end-session endpoint), or null. */
  endSessionUrl(idToken: string | undefined): Promise<URL | null> {
    return this.#client.endSessionUrl(idToken)
  }

  /** Where {@link endSessionUrl} sends a browser, as an origin (see `OidcClient.logoutOrigin`), or null. */
  logoutOrigin(): string | null {
    return this.#client.logoutOrigin()
  }

  /**
   * A back-channel logout: verifies the token, claims it (a token already acted on is 400
   * `logout_token_invalid`, on every replica, until it expires), and lets `end` sign out whom it names. Should
   * `end` fail, the claim is withdrawn, so the IdP's retry of the same token is not refused as a replay.
   */
  async backChannelLogout<T>(
    token: string,
    end: (whom: LogoutToken) => Promise<T>,
  ): Promise<{ whom: LogoutToken; ended: T }> {
    const whom = await this.#client.verifyLogoutToken(token)
    const key = credentialDigest(`${whom.iss} ${whom.jti}`)
    if (!(await this.#usedLogoutTokens.claim(key, whom.acceptedUntil)))
      throw new LogoutTokenInvalid('it was used already (its jti was seen before)')
    try {
      return { whom, ended: await end(whom) }
    } catch (err) {
      await this.#usedLogoutTokens.release(key).catch(() => {})
      throw err
    }
  }
}
