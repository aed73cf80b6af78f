import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { hashSessionId } from '../auth/cookie-sessions.ts'
import { signInBinding } from '../auth/oidc/binding.ts'
import { oidcSettings } from '../auth/oidc/settings.ts'
import { type NoRoleError, returnToOf } from '../auth/oidc/signin.ts'
import { signInElsewhere } from '../auth/oidc/signin-origin.ts'
import type { AuthRefusalReason } from '../auth/plugin.ts'
import { safeReturnTo } from '../auth/return-to.ts'
import { BadRequest, LogoutTokenInvalid, NoRole, SignInNotConfigured } from '../errors.ts'
import { AUTH } from '../openapi/routes/auth.ts'
import { signedIn as signedInPage, signedOut } from '../pages/catalogue.ts'
import { headerToken } from '../pages/navigation.ts'
import { returnAfterSignIn } from '../pages/plugin.ts'

interface LoginQuery {
  ticket?: string
  return_to?: string
  prompt?: string
}

/**
 * `auth/login` is audited only as the demo's one-time link: starting a sign-in at the IdP is not recorded,
 * only its outcome at `auth/callback`.
 */
const loginAudit = {
  audit: (request: FastifyRequest) =>
    /(?:^|&)ticket=/.test(request.url.split('?')[1] ?? '') ? 'auth/login' : null,
}

/** How long a sign-out is remembered for the next sign-in's `prompt=login`: a month. */
const SIGNED_OUT_MAX_AGE_S = 30 * 86_400

/**
 * Sign-in and sign-out for people, under the base path:
 *
 * - `GET auth/login?return_to=<path>[&prompt=login]`: 302 to the identity provider (state, nonce, PKCE S256),
 *   bound to this browser by a short-lived HttpOnly cookie, after a 303 to the callback's origin when the
 *   request came to another host, and with `prompt=login` after a sign-out from this browser; or, with
 *   `?ticket=`, the demo's one-time link.
 * - `GET auth/callback`: the IdP's answer; a cookie session and 303 to `return_to`, or a page saying why not.
 * - `POST auth/logout`: ends the cookie session on every replica, then RP-initiated logout at the IdP.
 * - `GET auth/logged-out`: the signed-out page the IdP returns to.
 * - `POST auth/backchannel-logout`: OpenID Connect Back-Channel Logout 1.0, from the IdP.
 *
 * Every outcome of callback, logout, back-channel logout and the one-time link is an audit record.
 */
export async function signInRoutes(app: FastifyInstance): Promise<void> {
  const { config } = app
  const base = config.basePath
  const signIn = app.auth.signIn
  const binding = signInBinding(app)

  // Set by a sign-out here: the next sign-in from this browser asks the IdP to ask for the password
  // (prompt=login), whatever the person answered at its end-session page. Not a secret (a forged one only
  // makes the IdP ask for the password), so plain; gone with that sign-in.
  const signedOutCookie = config.cookieSecure ? '__Host-krg_signed_out' : 'krg_signed_out'
  const signedOutAttributes: CookieSerializeOptions = {
    path: '/',
    httpOnly: true,
    secure: config.cookieSecure,
    sameSite: 'lax',
    maxAge: SIGNED_OUT_MAX_AGE_S,
  }
  const settings = oidcSettings(config)
  const signInOrigin = settings === null ? null : new URL(settings.redirectUri).origin

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // The IdP posts logout tokens as a form (the only form this plugin reads).
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 16 * 1024 },
    (_request, body, done) => done(null, new URLSearchParams(body as string)),
  )

  /** Counts a refused sign-in (failed sign-ins of the address, metrics) and rethrows it for the page. */
  const refused = (request: FastifyRequest, err: unknown): never => {
    const { code: raw, reason } = err as { code?: string; reason?: unknown }
    const code = raw?.toLowerCase()
    if (typeof reason === 'string') request.auditDetail.reason = reason
    if (code !== undefined && /^(signin_|idp_|no_role|logout_token)/.test(code))
      throw app.auth.refuseSignIn(request, code as AuthRefusalReason, err as Error)
    throw err
  }

  app.get<{ Querystring: LoginQuery }>(
    '/auth/login',
    { schema: AUTH.login, config: loginAudit },
    async (request, reply) => {
      const { ticket } = request.query
      if (typeof ticket === 'string') return ticketSignIn(request, reply, ticket)
      if (signIn === null) throw new SignInNotConfigured()
      if (request.query.prompt !== undefined && request.query.prompt !== 'login')
        throw new BadRequest('prompt may only be "login"')
      // The binding cookie must be set where the IdP returns to: another host of this gateway goes there first.
      const elsewhere = signInOrigin === null ? null : signInElsewhere(request, signInOrigin)
      if (elsewhere !== null) return reply.redirect(elsewhere, 303)
      // Signed out from this browser: whatever the person told the IdP then, it asks for the password now.
      const prompt = request.query.prompt ?? (request.cookies?.[signedOutCookie] ? 'login' : undefined)
      const returnTo = safeReturnTo(request.query.return_to, base)
      // Already signed in (and not asking to sign in anew): no need to bother the IdP.
      if (prompt === undefined && (await signedIn(request))) return reply.redirect(returnTo, 303)
      const url = await signIn.begin({
        returnTo,
        bindingHash: binding.bind(request, reply),
        ...(prompt === undefined ? {} : { prompt }),
      })
      return reply.header('referrer-policy', 'no-referrer').redirect(url.href, 302)
    },
  )

  /** The demo's one-time link (`npm start`). */
  async function ticketSignIn(request: FastifyRequest, reply: FastifyReply, ticket: string) {
    request.auditDetail.action = 'sign_in'
    if (ticket.length === 0 || ticket.length > 256) throw new BadRequest('ticket must be 1 to 256 characters')
    const claims = app.auth.cookies.consumeTicket(request, ticket)
    request.operator = await app.auth.cookies.start(reply, claims)
    reply.clearCookie(signedOutCookie, signedOutAttributes)
    // The ticket must not linger in history or a Referer: leave its URL at once.
    return reply.header('referrer-policy', 'no-referrer').redirect(base, 303)
  }

  app.get(
    '/auth/callback',
    { schema: AUTH.callback, config: { audit: 'auth/callback' } },
    async (request, reply) => {
      request.auditDetail.action = 'sign_in'
      if (signIn === null) throw new SignInNotConfigured()
      app.auth.assertSignInAllowed(request)
      const query = new URLSearchParams(request.url.split('?')[1] ?? '')
      const bound = binding.current(request)
      let done: Awaited<ReturnType<typeof signIn.complete>>
      try {
        done = await signIn.complete(query, bound === undefined ? undefined : hashSessionId(bound))
      } catch (err) {
        // The IdP did sign this person in: the record says who was turned away.
        if (err instanceof NoRole) request.auditDetail.sub = (err as NoRoleError).sub
        returnAfterSignIn(request, returnToOf(err))
        return refused(request, err)
      }
      binding.clear(reply)
      // The bot tenant's Entra sign-in makes the person known in Teams at once (chat/msteams/entra.ts).
      await app.teamsChat?.entra.signedIn(done)
      // A sign-in started to link a chat account records no cookie session: the link is confirmed next.
      if (done.chatLink !== undefined && app.chatLinking !== null)
        return app.chatLinking.signedIn(request, reply, { ...done, chatLink: done.chatLink })
      request.operator = await app.auth.cookies.start(reply, done.claims, undefined, done.idp)
      reply.clearCookie(signedOutCookie, signedOutAttributes)
      reply.header('referrer-policy', 'no-referrer')
      // After an IdP on another site, a redirect would arrive without the new SameSite=Strict cookie (the chain
      // began there): a page that continues by itself makes the next navigation same-site.
      if (headerToken(request, 'sec-fetch-site') === 'cross-site')
        return app.pages.send(
          reply,
          signedInPage({ continueTo: done.returnTo, name: done.claims.name ?? done.claims.sub }),
        )
      return reply.redirect(done.returnTo, 303)
    },
  )

  app.post(
    '/auth/logout',
    { schema: AUTH.logout, config: { audit: 'auth/logout' } },
    async (request, reply) => {
      request.auditDetail.action = 'sign_out'
      // Signed out already (or never signed in): nothing to end, the answer is the same.
      const operator = await signedIn(request)
      if (operator) app.auth.checkCsrf(request, operator)
      const idToken = operator ? (await app.auth.cookies.idpTokens(request))?.idToken : undefined
      await app.auth.cookies.end(request, reply)
      reply.setCookie(signedOutCookie, '1', signedOutAttributes)
      const endSession = signIn === null ? null : await signIn.endSessionUrl(idToken)
      return reply.redirect(endSession?.href ?? `${base}auth/logged-out`, 303)
    },
  )

  app.get('/auth/logged-out', { schema: AUTH.loggedOut }, async (_request, reply) =>
    app.pages.send(reply, signedOut()),
  )

  app.post<{ Body: URLSearchParams | undefined }>(
    '/auth/backchannel-logout',
    // From the IdP's one address, its credential in the body (verified, and failures counted per address).
    { schema: AUTH.backChannelLogout, config: { audit: 'auth/backchannel-logout', anonymousLimit: false } },
    async (request, reply) => {
      request.auditDetail.action = 'backchannel_logout'
      if (signIn === null) throw new SignInNotConfigured()
      app.auth.assertSignInAllowed(request)
      const token = request.body instanceof URLSearchParams ? request.body.getAll('logout_token') : []
      if (token.length !== 1 || token[0] === '') {
        return refused(request, new LogoutTokenInvalid('send exactly one logout_token form field'))
      }
      let logout: Awaited<ReturnType<typeof signIn.backChannelLogout<number>>>
      try {
        // With a sid, that IdP session's sign-ins; with only a sub, the person's sign-ins through this
        // issuer that began by the token's iat (to the second), never a cookie session made from a bearer.
        logout = await signIn.backChannelLogout(token[0] ?? '', ({ iss, sid, sub, iat }) =>
          sid !== undefined
            ? app.auth.revokeIdpSession(iss, sid)
            : app.auth.revokeIdpSubject(iss, sub ?? '', (iat + 1) * 1000),
        )
      } catch (err) {
        return refused(request, err)
      }
      const { whom, ended } = logout
      // The IdP's signed token authenticated it: an action of the trail, not a refusal.
      request.auditDetail.authenticated = true
      if (whom.sub !== undefined) request.auditDetail.sub = whom.sub
      request.log.info({ sub: whom.sub, ended }, 'back-channel logout')
      return reply.code(200).send({ ended })
    },
  )

  /** The operator of a valid session cookie, or null (never throws: sign-in pages work signed out). */
  async function signedIn(request: FastifyRequest) {
    if (!request.cookies?.[config.cookieName]) return null
    try {
      return await app.auth.authenticate(request, 'cookie')
    } catch {
      return null
    }
  }
}
