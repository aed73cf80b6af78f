import { createRemoteJWKSet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose'
import * as oidc from 'openid-client'
import {
  IdpRefused,
  IdpUnavailable,
  LogoutTokenInvalid,
  SignInCodeInvalid,
  SignInDenied,
  SignInTokenInvalid,
} from '../../errors.ts'
import { claimAt } from '../claims.ts'
import type { OidcSettings } from './settings.ts'

/** The IdP's tokens the gateway keeps (sealed, server-side) for a cookie session. */
export interface IdpTokens {
  readonly refreshToken?: string
  /** For `id_token_hint` at RP-initiated logout. */
  readonly idToken?: string
}

/** What the IdP said about the person: ID token claims, and userinfo when the ID token lacked a claim we read. */
export interface IdpAnswer {
  readonly idClaims: Record<string, unknown>
  readonly userinfo?: Record<string, unknown>
  readonly tokens: IdpTokens
}

/** A verified back-channel logout token: whom it signs out, and what identifies it. */
export interface LogoutToken {
  /** The issuer (the configured IdP's, as discovery names it). */
  readonly iss: string
  readonly jti: string
  /** When the IdP issued it (seconds since epoch). */
  readonly iat: number
  /** Epoch ms after which verification refuses it anyway (its `exp` or maximum age, with the tolerance). */
  readonly acceptedUntil: number
  /** The IdP session to end; with it, `sub` only names the person. */
  readonly sid?: string
  /** Without `sid`: the person whose sign-ins through this issuer before `iat` end. */
  readonly sub?: string
}

/** What the callback checks the answer against (from the login attempt the browser started). */
export interface CallbackChecks {
  readonly state: string
  readonly nonce: string
  readonly codeVerifier: string
}

/** Why an IdP answer was not usable; the error codes of errors.ts. */
type Failure = InstanceType<
  | typeof IdpUnavailable
  | typeof IdpRefused
  | typeof SignInDenied
  | typeof SignInCodeInvalid
  | typeof SignInTokenInvalid
>

const LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout'
/** A logout token is accepted this long after its `iat` at most (a late delivery, a retry), in seconds. */
const LOGOUT_TOKEN_MAX_AGE_S = 600
const LOGOUT_CLOCK_TOLERANCE_S = 30
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
/** Answers to the authorization request that mean the person (or the IdP's policy for them) said no. */
const DENIALS = new Set([
  'access_denied',
  'consent_required',
  'login_required',
  'interaction_required',
  'account_selection_required',
])

/**
 * The gateway as a confidential OpenID Connect client (openid-client v6): discovery (lazy, cached, retried
 * after a failure), the authorization request with PKCE S256, the code exchange with every ID token check
 * openid-client makes (signature by the IdP's JWKS, issuer, audience, nonce, expiry), userinfo, refresh,
 * RP-initiated logout and the verification of back-channel logout tokens (jose). Every failure is translated
 * here into one of the gateway's errors: the IdP down is 503 `idp_unavailable`, never a 500.
 */
export class OidcClient {
  readonly #s: OidcSettings
  #discovered: Promise<{ config: oidc.Configuration; keys: JWTVerifyGetKey }> | null = null
  /** What the last successful discovery said (read without waiting by {@link logoutOrigin}). */
  #metadata: oidc.ServerMetadata | null = null

  constructor(settings: OidcSettings) {
    this.#s = settings
  }

  /** Discovery document and keys, fetched once; a failed discovery is tried again by the next call. */
  async #discovery(): Promise<{ config: oidc.Configuration; keys: JWTVerifyGetKey }> {
    this.#discovered ??= this.#discover()
    try {
      return await this.#discovered
    } catch (err) {
      this.#discovered = null
      throw err
    }
  }

  async #discover(): Promise<{ config: oidc.Configuration; keys: JWTVerifyGetKey }> {
    const s = this.#s
    let config: oidc.Configuration
    try {
      config = await oidc.discovery(
        s.issuer,
        s.clientId,
        { client_secret: s.clientSecret },
        oidc.ClientSecretBasic(s.clientSecret),
        {
          timeout: Math.ceil(s.timeoutMs / 1000),
          // ID tokens from the token endpoint are checked against the IdP's JWKS too, not only trusted for
          // arriving over TLS: a proxy or a compromised hop in between cannot name someone else.
          execute: [oidc.enableNonRepudiationChecks, ...(s.allowHttp ? [oidc.allowInsecureRequests] : [])],
        },
      )
    } catch (err) {
      throw translate(err, 'discovery')
    }
    const jwksUri = config.serverMetadata().jwks_uri
    if (jwksUri === undefined) throw refused('its discovery document names no jwks_uri')
    this.#metadata = config.serverMetadata()
    return { config, keys: createRemoteJWKSet(new URL(jwksUri), { timeoutDuration: s.timeoutMs }) }
  }

  /** Where to send the person: the authorization endpoint with state, nonce and the PKCE S256 challenge. */
  async authorizationUrl(options: {
    state: string
    nonce: string
    codeVerifier: string
    prompt?: 'login'
  }): Promise<URL> {
    const { config } = await this.#discovery()
    return oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.#s.redirectUri,
      scope: this.#s.scopes,
      response_type: 'code',
      state: options.state,
      nonce: options.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(options.codeVerifier),
      code_challenge_method: 'S256',
      ...(options.prompt === undefined ? {} : { prompt: options.prompt }),
    })
  }

  /** The callback: checks the authorization response, exchanges the code, verifies the ID token. */
  async exchange(query: URLSearchParams, checks: CallbackChecks): Promise<IdpAnswer> {
    const { config } = await this.#discovery()
    // The URL the IdP redirected to, as registered: the request's own host and path are the proxy's business.
    const current = new URL(this.#s.redirectUri)
    current.search = query.toString()
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
    try {
      tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: checks.codeVerifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
      })
    } catch (err) {
      throw translate(err, 'code')
    }
    return this.#answer(config, tokens, {})
  }

  /**
   * Refreshes with the refresh token: the person's current claims, and the tokens to keep (a rotated refresh
   * token replaces the old one). `refused` when the IdP says no (the person is disabled, the grant revoked).
   */
  async refresh(tokens: IdpTokens): Promise<IdpAnswer | 'refused'> {
    if (tokens.refreshToken === undefined) return 'refused'
    const { config } = await this.#discovery()
    let answer: Awaited<ReturnType<typeof oidc.refreshTokenGrant>>
    try {
      answer = await oidc.refreshTokenGrant(config, tokens.refreshToken)
    } catch (err) {
      // The person's grant is gone (disabled, signed out, revoked). Anything else (the IdP down, or refusing
      // the gateway itself) is no verdict on the person: the session stays and the refresh is tried again.
      if (err instanceof oidc.ResponseBodyError && err.error === 'invalid_grant') return 'refused'
      throw translate(err, 'refresh')
    }
    return this.#answer(config, answer, tokens)
  }

  async #answer(
    config: oidc.Configuration,
    tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
    previous: IdpTokens,
  ): Promise<IdpAnswer> {
    const fromToken = tokens.claims() as Record<string, unknown> | undefined
    const idClaims = fromToken ?? {}
    const kept: IdpTokens = {
      ...((tokens.refresh_token ?? previous.refreshToken) === undefined
        ? {}
        : { refreshToken: tokens.refresh_token ?? previous.refreshToken }),
      ...((tokens.id_token ?? previous.idToken) === undefined
        ? {}
        : { idToken: tokens.id_token ?? previous.idToken }),
    }
    const { roles, teams, groups } = this.#s.claims
    const read = this.#s.groupMap.size > 0 ? [roles, teams, groups] : [roles, teams]
    const lacking = fromToken === undefined || read.some((name) => claimAt(idClaims, name) === undefined)
    if (!lacking || config.serverMetadata().userinfo_endpoint === undefined) return { idClaims, tokens: kept }
    let userinfo: Record<string, unknown>
    try {
      const sub = typeof idClaims.sub === 'string' ? idClaims.sub : oidc.skipSubjectCheck
      userinfo = (await oidc.fetchUserInfo(config, tokens.access_token, sub)) as Record<string, unknown>
    } catch (err) {
      throw translate(err, 'userinfo')
    }
    // A refresh without a new ID token: userinfo is all there is, and it names the subject.
    return { idClaims: fromToken === undefined ? { sub: userinfo.sub } : idClaims, userinfo, tokens: kept }
  }

  /**
   * The origin of the IdP's end-session endpoint, where a sign-out form's redirect goes (the console's CSP
   * must allow it), without waiting: until a discovery has answered, the issuer's origin (and a discovery is
   * started). Null when the IdP has no end-session endpoint.
   */
  logoutOrigin(): string | null {
    if (this.#metadata === null) {
      this.#discovery().catch(() => {})
      return this.#s.issuer.origin
    }
    const endpoint = this.#metadata.end_session_endpoint
    return endpoint === undefined ? null : new URL(endpoint).origin
  }

  /** The IdP's end-session URL (RP-initiated logout) back to the signed-out page, or null if it has none. */
  async endSessionUrl(idToken: string | undefined): Promise<URL | null> {
    let config: oidc.Configuration
    try {
      config = (await this.#discovery()).config
    } catch {
      // Sign-out at the gateway has happened; the IdP being down must not stop it.
      return null
    }
    if (config.serverMetadata().end_session_endpoint === undefined) return null
    return oidc.buildEndSessionUrl(config, {
      post_logout_redirect_uri: this.#s.postLogoutRedirectUri,
      ...(idToken === undefined ? {} : { id_token_hint: idToken }),
    })
  }

  /**
   * Verifies a back-channel logout token (OpenID Connect Back-Channel Logout 1.0, 2.6): signed by the IdP's
   * keys with an asymmetric algorithm, our issuer and audience, `iat`, `jti`, the logout event, `sid` or `sub`,
   * and no `nonce` (so an ID token cannot pass for one). Returns whom to sign out, and what tells the token
   * apart from a replay. Whether it was used before is the caller's to check (`SignIn.backChannelLogout`).
   */
  async verifyLogoutToken(token: string): Promise<LogoutToken> {
    const { config, keys } = await this.#discovery()
    let payload: JWTPayload
    let typ: string | undefined
    try {
      const verified = await jwtVerify(token, keys, {
        issuer: config.serverMetadata().issuer,
        audience: this.#s.clientId,
        algorithms: ASYMMETRIC,
        requiredClaims: ['iat', 'jti', 'events'],
        maxTokenAge: LOGOUT_TOKEN_MAX_AGE_S,
        clockTolerance: LOGOUT_CLOCK_TOLERANCE_S,
      })
      payload = verified.payload
      typ = verified.protectedHeader.typ
    } catch (err) {
      if (isNetworkFailure(err)) throw new IdpUnavailable({ cause: err })
      throw new LogoutTokenInvalid('it does not verify (signature, issuer, audience or age)', { cause: err })
    }
    if (typ !== undefined && typ.toLowerCase().replace(/^application\//, '') !== 'logout+jwt')
      throw new LogoutTokenInvalid('its typ is not logout+jwt')
    const events = payload.events
    const event =
      typeof events === 'object' && events !== null
        ? (events as Record<string, unknown>)[LOGOUT_EVENT]
        : undefined
    if (typeof event !== 'object' || event === null)
      throw new LogoutTokenInvalid('it carries no logout event')
    if (payload.nonce !== undefined) throw new LogoutTokenInvalid('it carries a nonce')
    const sid = typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : undefined
    const sub = typeof payload.sub === 'string' && payload.sub !== '' ? payload.sub : undefined
    if (sid === undefined && sub === undefined) throw new LogoutTokenInvalid('it names neither sid nor sub')
    const { iss, jti, iat, exp } = payload as { iss: string; jti: unknown; iat: number; exp?: number }
    if (typeof jti !== 'string' || jti === '') throw new LogoutTokenInvalid('its jti is not a string')
    // jose refuses it once past `exp` or `iat + max age`, each with the tolerance, in whole seconds.
    const lastS = Math.min(exp ?? Number.POSITIVE_INFINITY, iat + LOGOUT_TOKEN_MAX_AGE_S)
    return {
      iss,
      jti,
      iat,
      acceptedUntil: (lastS + LOGOUT_CLOCK_TOLERANCE_S + 1) * 1000,
      ...(sid === undefined ? {} : { sid }),
      ...(sub === undefined ? {} : { sub }),
    }
  }
}

/** A request that never got an HTTP answer (refused, reset, DNS, timeout). */
function isNetworkFailure(err: unknown): boolean {
  if (err instanceof TypeError && /fetch failed/.test(err.message)) return true
  const name = (err as { name?: string; code?: string } | undefined)?.name
  const code = (err as { code?: string } | undefined)?.code
  return (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'ERR_JWKS_TIMEOUT' ||
    code === 'OAUTH_TIMEOUT'
  )
}

/**
 * The one place IdP failures become gateway errors, each carrying its {@link Refusal.reason}. `step` shapes the
 * message and decides what a failure means:
 *
 * - `signin_token_invalid` (400): the answer carried a token the gateway refuses: an ID token (or userinfo)
 *   failing a check of its own, its algorithm (`none` and symmetric ones are never accepted: only a signature
 *   by the IdP's published keys is), signature, key, claims (issuer, audience, nonce, hashes, subject),
 *   timestamps or form.
 * - `signin_code_invalid` (400): the token endpoint answered `invalid_grant` to the code (used, expired, another
 *   sign-in's).
 * - `signin_denied` (403): the person, or the IdP's policy for them, said no at the authorization endpoint.
 * - `idp_refused` (502): the IdP refused the gateway itself (any other OAuth error: `invalid_client`,
 *   `unauthorized_client`, `invalid_request`, …) or answered with something that is no usable OAuth answer
 *   (an unexpected status, no JSON, no ID token, a discovery document without keys or for another issuer).
 * - `idp_unavailable` (503): unreachable, timed out, a 5xx, `temporarily_unavailable` or `server_error`.
 */
function translate(err: unknown, step: 'discovery' | 'code' | 'refresh' | 'userinfo'): Refusal {
  const opts = { cause: err }
  if (isNetworkFailure(err)) return refusal(new IdpUnavailable(opts), 'unreachable')
  if (err instanceof oidc.AuthorizationResponseError) {
    const code = safeCode(err.error)
    if (DENIALS.has(err.error)) return refusal(new SignInDenied(code, opts), code)
    if (err.error === 'temporarily_unavailable' || err.error === 'server_error')
      return refusal(new IdpUnavailable(opts), code)
    return refusal(new IdpRefused(`it answered ${code}`, opts), `it answered ${code}`)
  }
  if (err instanceof oidc.ResponseBodyError) {
    const code = safeCode(err.error)
    if (err.status >= 500) return refusal(new IdpUnavailable(opts), `${step} endpoint answered ${err.status}`)
    if (err.error === 'invalid_grant' && step === 'code') {
      const why = 'it is used, expired or was issued for another sign-in'
      return refusal(new SignInCodeInvalid(why, opts), `invalid_grant: ${why}`)
    }
    return refused(`its ${step} endpoint answered ${code}`, opts)
  }
  if (err instanceof oidc.WWWAuthenticateChallengeError) {
    // A 401 with a challenge: the endpoint did not accept the gateway's credentials.
    const named = err.cause.find((c) => typeof c.parameters.error === 'string')?.parameters.error
    const code = named === undefined ? `${err.status} with a challenge` : safeCode(named)
    return refused(`its ${step} endpoint answered ${code}`, opts)
  }
  if (err instanceof oidc.ClientError) {
    const status = (err.cause as { status?: unknown } | undefined)?.status
    if (
      (err.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || err.code === 'OAUTH_RESPONSE_IS_NOT_JSON') &&
      typeof status === 'number' &&
      status >= 500
    )
      return refusal(new IdpUnavailable(opts), `${step} endpoint answered ${status}`)
    if (step !== 'discovery') {
      const why = tokenRefusal(err)
      if (why !== undefined) return refusal(new SignInTokenInvalid(why, opts), why)
    }
    return refused(`its ${step} answer is unusable: ${causeMessage(err)}`, opts)
  }
  return refused(`${step} failed`, opts)
}

/** The error to throw for a failure, and the reason its audit record gives. */
export type Refusal = Failure & { readonly reason: string }

function refusal<E extends Failure>(error: E, reason: string): E & { readonly reason: string } {
  return Object.assign(error, { reason })
}

function refused(why: string, opts?: { cause: unknown }): Refusal {
  return refusal(new IdpRefused(why, opts), why)
}

/** Failures that are about a token (a JWT) in the IdP's answer, whatever else they share a code with. */
const TOKEN_CODES = new Set([
  'OAUTH_JWT_CLAIM_COMPARISON',
  'OAUTH_JWT_TIMESTAMP_CHECK',
  'OAUTH_KEY_SELECTION_FAILED',
  // The userinfo answer names another subject than the ID token.
  'OAUTH_JSON_ATTRIBUTE_COMPARISON',
  // Raised while checking a JWT only: its alg, key type or size, a `crit` header, an encrypted token.
  'OAUTH_UNSUPPORTED_OPERATION',
])

/**
 * Why the gateway refused a token in the IdP's answer (oauth4webapi's fixed wording, which names the check and
 * never a value; the algorithm for one it does not accept), or undefined when the failure is not about one.
 */
function tokenRefusal(err: oidc.ClientError): string | undefined {
  const message = causeMessage(err)
  const about = TOKEN_CODES.has(err.code ?? '')
    ? true
    : (err.code === 'OAUTH_INVALID_RESPONSE' || err.code === 'OAUTH_PARSE_ERROR') &&
      /JWT|ID Token/.test(message)
  if (!about) return undefined
  const alg = rejectedAlg(err)
  return alg === undefined ? message : `alg ${alg} is not accepted: only a signature by the IdP's keys is`
}

/** The `alg` of a JWT refused for its algorithm (not listed by the IdP, or not one checked with its keys). */
function rejectedAlg(err: oidc.ClientError): string | undefined {
  const cause = err.cause as { message?: string; cause?: { alg?: unknown; header?: { alg?: unknown } } }
  if (!/"alg"|JWS algorithm/.test(cause?.message ?? '')) return undefined
  const alg = cause.cause?.alg ?? cause.cause?.header?.alg
  if (typeof alg !== 'string') return 'of an unexpected type'
  return /^[A-Za-z0-9_+-]{1,32}$/.test(alg) ? alg : 'an unrecognised one'
}

/** oauth4webapi's message of what openid-client wrapped (its own when it wrapped nothing). */
function causeMessage(err: oidc.ClientError): string {
  return err.cause instanceof Error ? err.cause.message : err.message
}

/** An OAuth error code for a message, never arbitrary text from a URL. */
function safeCode(code: string): string {
  return /^[a-z_]{1,64}$/.test(code) ? code : 'an unrecognised error'
}
