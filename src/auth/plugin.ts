import fastifyCookie, { type CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { JWTPayload } from 'jose'
import {
  CsrfRefused,
  Forbidden,
  InvalidCredential,
  JwksUnavailable,
  StoreUnavailable,
  TooManyFailedSignIns,
  Unauthenticated,
} from '../errors.ts'
import { registerAnonymousLimit } from '../http/anonymous-limit.ts'
import { People, toOperator } from '../identity/people.ts'
import { AddressFailures } from './address-failures.ts'
import { CheckedCookies } from './checked-cookies.ts'
import { type OperatorClaims, operatorClaims } from './claims.ts'
import type { CookieRefusalReason, CookieSessions, IdpSignIn } from './cookie-sessions.ts'
import type { RevocationListener } from './cookie-store.ts'
import { csrfRefusal } from './csrf.ts'
import { createTokenVerifier, type TokenRefusalReason, TokenRefused } from './jwt.ts'
import { LoginTickets } from './login-tickets.ts'
import { type IdpTokens, OidcClient } from './oidc/client.ts'
import { LoginAttempts } from './oidc/login-attempts.ts'
import { oidcSettings } from './oidc/settings.ts'
import { SignIn } from './oidc/signin.ts'
import { type Access, allows, type Operator, type Role } from './operator.ts'
import { registerRateLimit } from './rate-limit.ts'
import { resolveAuthSecrets } from './secrets.ts'

/** Every reason a request is refused by auth: the `reason` label of `krg_auth_failures_total`. */
export type AuthRefusalReason =
  | 'missing'
  | TokenRefusalReason
  | CookieRefusalReason
  | 'csrf'
  | 'forbidden'
  | 'ticket_invalid'
  | 'store_unavailable'
  | 'signin_rate_limited'
  | SignInRefusalReason

/** Why a sign-in through the identity provider (or a back-channel logout) was refused. */
export type SignInRefusalReason =
  | 'signin_denied'
  | 'signin_state_invalid'
  | 'signin_code_invalid'
  | 'signin_token_invalid'
  | 'idp_refused'
  | 'idp_unavailable'
  | 'no_role'
  | 'logout_token_invalid'

/**
 * Refusals that count against the client address's failed sign-ins: a credential that was never valid
 * (forged, guessed, replayed). Credentials that merely aged (expired, idle, signed out), a missing one, and
 * faults of the identity provider do not: a person's stale tabs must not lock their network out.
 */
const countedFailures: ReadonlySet<AuthRefusalReason> = new Set<AuthRefusalReason>([
  'malformed',
  'bad_signature',
  'wrong_issuer',
  'wrong_audience',
  'missing_claim',
  'invalid_claim',
  'alg',
  'unknown_key',
  'cookie_invalid',
  'ticket_invalid',
  'signin_state_invalid',
  'signin_code_invalid',
  'signin_token_invalid',
  'logout_token_invalid',
])

/** Cookie session operations for routes/auth.ts. */
export interface CookieSessionControl {
  /**
   * Starts a cookie session for these claims, sets the cookie, and returns the cookie's operator. `idp` ties
   * it to a sign-in at the identity provider (its tokens are kept sealed, server-side only).
   */
  start(reply: FastifyReply, claims: OperatorClaims, notAfter?: number, idp?: IdpSignIn): Promise<Operator>
  /** The IdP tokens of the cookie session the request was authenticated with, if it came from the IdP. */
  idpTokens(request: FastifyRequest): Promise<IdpTokens | null>
  /**
   * Ends the cookie session the request was authenticated with: revokes it server-side and clears the
   * cookie. Resolves false when the request was not authenticated by a cookie (the cookie is cleared anyway).
   */
  end(request: FastifyRequest, reply: FastifyReply): Promise<boolean>
  /** Consumes a one-time login ticket; throws 401 when it is unknown, used or expired. */
  consumeTicket(request: FastifyRequest, ticket: string): OperatorClaims
}

/** The auth service on `app.auth`. */
export interface AuthService {
  /**
   * Authenticates the request (bearer first, then cookie); throws 401/503 errors. Sets request.operator.
   * `only` restricts it to one kind of credential (a cookie cannot mint another cookie; sign-out ends the
   * cookie session, whatever bearer comes along).
   */
  authenticate(request: FastifyRequest, only?: Operator['via']): Promise<Operator>
  /** The cross-site rule: throws 403 `csrf_refused` for a cookie-authenticated write from elsewhere. */
  checkCsrf(request: FastifyRequest, operator: Operator): void
  /** The same rule for a form a page of the gateway posts without a session (confirming a chat link). */
  assertSameOrigin(request: FastifyRequest): void
  /** For long-lived streams: is this operator's credential still valid now (cookie not revoked/expired, token not expired)? */
  stillValid(operator: Operator): Promise<boolean>
  issueLoginTicket(claims: { sub: string; name?: string; roles: Role[]; teams: string[] }): string
  /**
   * Throws 429 `signin_rate_limited` when the client address failed too many sign-ins recently; call it
   * before looking at any credential (authenticate and the ticket do it themselves).
   */
  assertSignInAllowed(request: FastifyRequest): void
  /**
   * Counts (metrics, log, and the address's failed sign-ins when the reason is a forged or replayed one) a
   * refused sign-in, and returns `error` to throw.
   */
  refuseSignIn<E extends Error>(request: FastifyRequest, reason: AuthRefusalReason, error: E): E
  /**
   * Revokes every cookie session of `sub` and removes their linked chat accounts (sign out everywhere, an
   * administrator removing access, a back-channel logout naming only the person).
   */
  revokeCookieSessions(sub: string): Promise<number>
  /**
   * Revokes every cookie session and chat link made through the IdP session `sid` of `iss` (back-channel
   * logout).
   */
  revokeIdpSession(iss: string, sid: string): Promise<number>
  /**
   * Revokes the cookie sessions and chat links of `sub` signed in through `iss` before `signedInBefore` (epoch
   * ms): a back-channel logout naming only the person. Cookie sessions made from a bearer are not among them.
   */
  revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number>
  /** Sign-in through the identity provider; null when none is configured (GATEWAY_OIDC_ISSUER). */
  readonly signIn: SignIn | null
  /**
   * Hears every cookie session revocation on every replica (sign-out, sign out everywhere, back-channel
   * logout, a refused refresh): the event path ends those sessions' streams at once.
   */
  onCookieRevoked(listener: RevocationListener): Promise<() => void>
  readonly cookies: CookieSessionControl
}

declare module 'fastify' {
  interface FastifyRequest {
    operator: Operator | null
  }
  interface FastifyInstance {
    auth: AuthService
    /** A person's identity: cookie sessions, linked chat accounts, refresh and revocation (src/identity). */
    people: People
    /**
     * An `onRequest` hook: authenticate, check the role for `access`, and for cookie writes the CSRF rule; 403
     * `forbidden` when the role is too low. Use it as a route's `onRequest`, so an anonymous request is refused
     * before its body is read (the rate limit runs later, in preHandler, and counts per operator).
     */
    requireAccess(access: Access): onRequestHookHandler
  }
}

/**
 * How long a cookie session looked up is answered from this replica's memory. A revocation on this replica
 * takes effect at once; one elsewhere (cluster mode) reaches it over Redis pub/sub at once, and this bounds it
 * should that message be lost.
 */
const COOKIE_RECENT_MS = 1000
/** Signed cookies kept verified: one per person active in the last hours, for thousands of people. */
const CHECKED_COOKIES_MAX = 10_000

const roleFor: Record<Access, Role> = { read: 'viewer', write: 'operator', admin: 'admin' }
const bearerPattern = /^Bearer[ \t]+([A-Za-z0-9._~+/-]+=*)[ \t]*$/i

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

/**
 * Operator authentication and authorisation: bearer JWTs (jose), opaque server-side cookie sessions
 * (@fastify/cookie, signed with a rotating secret list), the cross-site rule for cookie writes, the demo's
 * login tickets and the per-operator rate limit. Decorates `app.auth`, `app.requireAccess` and
 * `request.operator`. Every refusal is counted by reason and logged without the credential.
 */
export const authPlugin = fp(
  async (app) => {
    const { config } = app
    const { env } = config
    const secrets = resolveAuthSecrets(config)
    // The demo's banner says how to sign in, and everything of a demo ends with its process anyway.
    if (secrets.generated.length > 0 && !config.demo) {
      app.log.warn(
        { generated: secrets.generated },
        'auth secrets not configured: using random ones for this process (sign in with a login ticket; cookie sessions end on restart)',
      )
    }
    if (env.GATEWAY_JWT_SECRET && (!env.GATEWAY_JWT_ISSUER || !env.GATEWAY_JWT_AUDIENCE)) {
      app.log.warn(
        'GATEWAY_JWT_ISSUER and GATEWAY_JWT_AUDIENCE should be set: without them tokens are not checked for them',
      )
    }

    const verifier = createTokenVerifier({
      ...(secrets.jwtSecret === undefined ? {} : { secret: secrets.jwtSecret }),
      ...(env.GATEWAY_JWKS_URL === undefined ? {} : { jwksUrl: env.GATEWAY_JWKS_URL }),
      jwksAlgorithms: env.GATEWAY_JWT_ALGORITHMS,
      jwksTimeoutMs: env.GATEWAY_JWKS_TIMEOUT_MS,
      ...(env.GATEWAY_JWT_ISSUER === undefined ? {} : { issuer: env.GATEWAY_JWT_ISSUER }),
      ...(env.GATEWAY_JWT_AUDIENCE === undefined ? {} : { audience: env.GATEWAY_JWT_AUDIENCE }),
      clockToleranceS: env.GATEWAY_JWT_CLOCK_TOLERANCE_S,
    })
    const claimNames = { roles: env.GATEWAY_ROLES_CLAIM, teams: env.GATEWAY_TEAMS_CLAIM }

    await app.register(fastifyCookie, { secret: secrets.cookieSecrets, hook: 'onRequest' })
    // Right after the cookies are parsed, before any credential is judged or any body read.
    registerAnonymousLimit(app, {
      max: env.GATEWAY_ANONYMOUS_RATE_LIMIT_MAX,
      windowMs: env.GATEWAY_RATE_LIMIT_WINDOW_MS,
      store: app.stores.rateLimit,
      hasCredential: (request) =>
        header(request, 'authorization') !== undefined || Boolean(request.cookies?.[config.cookieName]),
    })

    const stores = app.stores
    const store = stores.cookies
    const sealer = stores.sealer
    const oidc = oidcSettings(config)
    const attemptStore = stores.loginAttempts
    const signIn =
      oidc === null
        ? null
        : new SignIn(
            new OidcClient(oidc),
            new LoginAttempts(attemptStore, sealer),
            oidc,
            stores.usedLogoutTokens,
          )
    const chatLinkStore =
      env.GATEWAY_SLACK_BOT_TOKEN === undefined && env.GATEWAY_TEAMS_APP_ID === undefined
        ? null
        : stores.chatLinks()
    const people = new People({
      cookies: store,
      cookieTtlMs: env.GATEWAY_COOKIE_TTL_S * 1000,
      cookieIdleMs: env.GATEWAY_COOKIE_IDLE_S * 1000,
      // A lookup is a Redis round trip in cluster mode, a copy of the record in memory: one per session per second.
      recentMs: COOKIE_RECENT_MS,
      sealer,
      ...(signIn === null || oidc === null ? {} : { refresher: signIn.refresher, refreshMs: oidc.refreshMs }),
      ...(chatLinkStore === null
        ? {}
        : { chatLinks: { store: chatLinkStore, ttlMs: env.GATEWAY_SLACK_LINK_TTL_S * 1000 } }),
      cookieSecrets: secrets.cookieSecrets,
      registry: app.metrics.registry,
      log: app.log,
    })
    const sessions = people.sessions
    const tickets = new LoginTickets()
    const failures = new AddressFailures({
      counter: stores.signInFailures,
      max: env.GATEWAY_SIGNIN_FAILURES_MAX,
      windowMs: env.GATEWAY_SIGNIN_FAILURES_WINDOW_MS,
      onCounterError: (err) => app.log.warn({ err }, 'failed sign-ins cannot be counted; not limiting'),
    })
    app.addHook('onClose', async () => {
      tickets.close()
      await people.close()
      await attemptStore.close()
      await chatLinkStore?.close()
      await store.close()
    })

    const cookieName = config.cookieName
    const cookieAttributes: CookieSerializeOptions = {
      path: '/',
      httpOnly: true,
      secure: config.cookieSecure,
      sameSite: 'strict',
    }
    const allowedOrigins = new Set(
      [env.GATEWAY_PUBLIC_ORIGIN, ...env.GATEWAY_ALLOWED_ORIGINS].filter((o): o is string => !!o),
    )
    const originAllowed = (request: FastifyRequest, origin: string): boolean =>
      allowedOrigins.has(origin) ||
      // Without a configured public origin (demo, laptop) the gateway's own origin is the UI's.
      (env.GATEWAY_PUBLIC_ORIGIN === undefined && origin === `${request.protocol}://${request.host}`)

    const counting = new WeakMap<FastifyRequest, Promise<void>>()
    /** Counts and logs a refusal (never the credential) and returns the error to throw. */
    const refuse = <E extends Error>(
      request: FastifyRequest,
      reason: AuthRefusalReason,
      error: E,
      detail: Record<string, unknown> = {},
    ): E => {
      app.metrics.authFailures.inc({ reason })
      request.log.info({ reason, ...detail }, 'auth refused')
      // The answer waits for the count (onSend below), so the next attempt already meets the limit.
      if (countedFailures.has(reason)) counting.set(request, failures.failed(request.ip))
      return error
    }

    // Seconds a refused address must wait, for the Retry-After of its 429.
    const retryAfter = new WeakMap<FastifyRequest, number>()
    function assertSignInAllowed(request: FastifyRequest): void {
      const seconds = failures.retryAfter(request.ip)
      if (seconds === 0) return
      retryAfter.set(request, seconds)
      throw refuse(request, 'signin_rate_limited', new TooManyFailedSignIns(String(seconds)))
    }

    // Cookies still signed with an older secret are re-signed with the current one on a good answer;
    // a refused cookie is cleared so the browser stops sending it.
    const renewals = new WeakMap<FastifyRequest, { id: string; expiresAt: number }>()
    const refusedCookies = new WeakSet<FastifyRequest>()
    const finishAnswer = (request: FastifyRequest, reply: FastifyReply): void => {
      const renew = renewals.get(request)
      if (renew && reply.statusCode < 400) setSessionCookie(reply, renew.id, renew.expiresAt)
      else if (refusedCookies.has(request)) reply.clearCookie(cookieName, cookieAttributes)
      const wait = retryAfter.get(request)
      if (wait !== undefined && reply.statusCode === 429) reply.header('retry-after', String(wait))
    }
    // Callback-style: only a refusal being counted waits; every other answer passes without a promise.
    app.addHook('onSend', (request, reply, payload, done) => {
      const counted = counting.get(request)
      if (counted === undefined) {
        finishAnswer(request, reply)
        return done(null, payload)
      }
      counted.then(() => {
        finishAnswer(request, reply)
        done(null, payload)
      }, done)
    })

    function setSessionCookie(reply: FastifyReply, id: string, expiresAt: number): void {
      const maxAge = Math.max(1, Math.ceil((expiresAt - Date.now()) / 1000))
      reply.setCookie(cookieName, id, { ...cookieAttributes, maxAge, signed: true })
    }

    // While a token is kept verified its payload is the same frozen object on every request: so is its
    // operator (read-only), instead of claims, sets and an object built again per request.
    const bearerOperators = new WeakMap<JWTPayload, Operator>()
    function bearerOperator(payload: JWTPayload): Operator {
      let operator = bearerOperators.get(payload)
      if (operator === undefined) {
        operator = toOperator(operatorClaims(payload, claimNames), 'bearer', (payload.exp ?? 0) * 1000)
        bearerOperators.set(payload, operator)
      }
      return operator
    }
    async function fromBearer(request: FastifyRequest, value: string): Promise<Operator> {
      const token = bearerPattern.exec(value)?.[1]
      if (token === undefined) {
        throw refuse(
          request,
          'malformed',
          new InvalidCredential('the Authorization header must be "Bearer <token>"'),
        )
      }
      try {
        return bearerOperator(await verifier.verify(token))
      } catch (err) {
        if (!(err instanceof TokenRefused)) throw err
        if (err.reason === 'jwks_unavailable') {
          app.metrics.authFailures.inc({ reason: err.reason })
          request.log.warn(
            { reason: err.reason, cause: (err.cause as Error | undefined)?.message },
            'auth refused',
          )
          throw new JwksUnavailable({ cause: err })
        }
        throw refuse(request, err.reason, new InvalidCredential(err.message))
      }
    }

    // Cookies whose signature verified (by hash): the HMAC once per cookie, not per request.
    const checkedCookies = new CheckedCookies(CHECKED_COOKIES_MAX)
    /** Unsigns the cookie (any secret of the list) and checks its server-side session. */
    async function fromCookie(request: FastifyRequest, raw: string): Promise<Operator> {
      const digest = checkedCookies.digest(raw)
      const known = checkedCookies.get(digest)
      let unsigned: ReturnType<typeof app.unsignCookie> | undefined
      let lookup: () => ReturnType<CookieSessions['check']>
      if (known !== undefined) lookup = () => sessions.check(known)
      else {
        unsigned = app.unsignCookie(raw)
        const id = unsigned.valid ? unsigned.value : null
        if (id === null) {
          refusedCookies.add(request)
          throw refuse(request, 'cookie_invalid', new InvalidCredential('session cookie is not valid'))
        }
        lookup = () => sessions.resolve(id)
      }
      let check: Awaited<ReturnType<CookieSessions['resolve']>>
      try {
        check = await lookup()
      } catch (err) {
        // During a known Redis outage (logged once by the cluster) every cookie request would repeat it.
        if (stores.down()) request.log.debug({ err }, 'cookie session store failed')
        else request.log.error({ err }, 'cookie session store failed')
        throw refuse(request, 'store_unavailable', new StoreUnavailable('cookie sessions', { cause: err }))
      }
      if (!check.ok) {
        checkedCookies.forget(digest)
        refusedCookies.add(request)
        const why: Record<CookieRefusalReason, string> = {
          cookie_invalid: 'session cookie is not valid',
          cookie_expired: 'session expired: sign in again',
          cookie_idle: 'session ended after inactivity: sign in again',
          cookie_revoked: 'session was signed out',
        }
        throw refuse(request, check.reason, new InvalidCredential(why[check.reason]))
      }
      if (unsigned?.renew && unsigned.value !== null)
        renewals.set(request, { id: unsigned.value, expiresAt: check.record.expiresAt })
      else if (unsigned !== undefined) checkedCookies.set(digest, check.idHash, check.record.expiresAt)
      return people.fromCookie(check.record, check.idHash)
    }

    async function authenticate(request: FastifyRequest, only?: Operator['via']): Promise<Operator> {
      if (request.operator && (only === undefined || request.operator.via === only)) return request.operator
      // An answer from a chat, made through this very path by the gateway itself (see identity/delegation.ts).
      const delegated = only === undefined ? people.delegated(request) : undefined
      if (delegated !== undefined) {
        request.operator = delegated
        return delegated
      }
      const authorization = only === 'cookie' ? undefined : header(request, 'authorization')
      let operator: Operator
      if (authorization !== undefined) {
        // An explicit credential wins; a bad one is never rescued by an ambient cookie.
        assertSignInAllowed(request)
        operator = await fromBearer(request, authorization)
      } else {
        const raw = only === 'bearer' ? undefined : request.cookies?.[cookieName]
        if (!raw) throw refuse(request, 'missing', new Unauthenticated())
        assertSignInAllowed(request)
        operator = await fromCookie(request, raw)
      }
      request.operator = operator
      return operator
    }

    /**
     * The operator of a credential this replica knows right now, without a promise: a bearer verified
     * before, or a cookie checked before whose session was looked up within the last second. Undefined when
     * {@link authenticate} must do the work (any other credential, every refusal). Most requests of a busy
     * operator end here.
     */
    function knownOperator(request: FastifyRequest): Operator | undefined {
      const authorization = header(request, 'authorization')
      if (authorization !== undefined) {
        const token = bearerPattern.exec(authorization)?.[1]
        const payload = token === undefined ? undefined : verifier.known(token)
        if (payload === undefined) return undefined
        assertSignInAllowed(request)
        return bearerOperator(payload)
      }
      const raw = request.cookies?.[cookieName]
      const idHash = raw ? checkedCookies.get(checkedCookies.digest(raw)) : undefined
      const check = idHash === undefined ? undefined : sessions.checkRecent(idHash)
      if (check === undefined || !check.ok) return undefined
      assertSignInAllowed(request)
      return people.fromCookie(check.record, check.idHash)
    }

    function checkCsrf(request: FastifyRequest, operator: Operator): void {
      if (operator.via === 'cookie') assertSameOrigin(request, operator.sub)
    }

    function assertSameOrigin(request: FastifyRequest, sub?: string): void {
      const why = csrfRefusal({
        method: request.method,
        secFetchSite: header(request, 'sec-fetch-site'),
        origin: header(request, 'origin'),
        originAllowed: (origin) => originAllowed(request, origin),
      })
      if (why !== undefined)
        throw refuse(request, 'csrf', new CsrfRefused(why), sub === undefined ? {} : { sub })
    }

    const cookies: CookieSessionControl = {
      async start(reply, claims, notAfter, idp) {
        const { id, record, operator } = await people.startCookieSession(claims, notAfter, idp)
        setSessionCookie(reply, id, record.expiresAt)
        return operator
      },
      async end(request, reply) {
        renewals.delete(request)
        reply.clearCookie(cookieName, cookieAttributes)
        const operator = request.operator
        if (operator?.via !== 'cookie' || operator.cookieSessionId === undefined) return false
        return sessions.revoke(operator.cookieSessionId)
      },
      async idpTokens(request) {
        const id = request.operator?.via === 'cookie' ? request.operator.cookieSessionId : undefined
        return id === undefined ? null : sessions.idpTokens(id)
      },
      consumeTicket(request, ticket) {
        assertSignInAllowed(request)
        const claims = tickets.consume(ticket)
        if (claims === null) {
          throw refuse(
            request,
            'ticket_invalid',
            new InvalidCredential('login link is invalid, used or expired'),
          )
        }
        return claims
      },
    }

    const service: AuthService = {
      authenticate,
      checkCsrf,
      assertSameOrigin: (request) => assertSameOrigin(request),
      stillValid: (operator) => people.stillValid(operator),
      issueLoginTicket: (claims) => tickets.issue(claims),
      assertSignInAllowed,
      refuseSignIn: (request, reason, error) => refuse(request, reason, error),
      revokeCookieSessions: (sub) => people.revokePerson(sub),
      revokeIdpSession: (iss, sid) => people.revokeIdpSession(iss, sid),
      revokeIdpSubject: (iss, sub, before) => people.revokeIdpSubject(iss, sub, before),
      signIn,
      onCookieRevoked: (listener) => people.onCookieRevoked(listener),
      cookies,
    }

    app.decorateRequest('operator', null)
    app.decorate('auth', service)
    app.decorate('people', people)
    app.decorate('requireAccess', (access: Access): onRequestHookHandler => {
      const authorise = (request: FastifyRequest, operator: Operator): void => {
        checkCsrf(request, operator)
        if (!allows(operator, access)) {
          throw refuse(
            request,
            'forbidden',
            new Forbidden(`${access} access needs the ${roleFor[access]} role`),
            { sub: operator.sub },
          )
        }
      }
      // Callback-style, with no promise at all for a known credential: every proxied request passes here.
      return (request, _reply, done) => {
        let known: Operator | undefined
        try {
          known = request.operator ?? knownOperator(request)
          if (known !== undefined) {
            request.operator = known
            authorise(request, known)
          }
        } catch (err) {
          done(err as Error)
          return
        }
        if (known !== undefined) {
          done()
          return
        }
        authenticate(request).then((operator) => {
          try {
            authorise(request, operator)
          } catch (err) {
            done(err as Error)
            return
          }
          done()
        }, done)
      }
    })

    registerRateLimit(app, {
      max: env.GATEWAY_RATE_LIMIT_MAX,
      windowMs: env.GATEWAY_RATE_LIMIT_WINDOW_MS,
      store: stores.rateLimit,
    })
  },
  { name: 'auth', dependencies: ['metrics', 'stores'] },
)
