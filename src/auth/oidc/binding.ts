import { randomBytes } from 'node:crypto'
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { hashSessionId } from '../cookie-sessions.ts'

/** How long the browser binding of a sign-in lives: as long as a login attempt. */
const BINDING_MAX_AGE_S = 600

/**
 * The browser binding of a sign-in at the identity provider (login CSRF): a random value in a short-lived,
 * signed, HttpOnly cookie, whose hash the login attempt keeps; the callback is honoured only in the browser
 * that started it. Every route that starts a sign-in (`auth/login`, `auth/slack-link`) binds with this.
 */
export interface SignInBinding {
  /** This browser's binding (its cookie's value), or undefined. */
  current(request: FastifyRequest): string | undefined
  /** Binds this browser (keeping a binding it has) and returns the hash a login attempt keeps. */
  bind(request: FastifyRequest, reply: FastifyReply): string
  clear(reply: FastifyReply): void
}

export function signInBinding(app: FastifyInstance): SignInBinding {
  const name = app.config.cookieSecure ? '__Host-krg_signin' : 'krg_signin'
  const attributes: CookieSerializeOptions = {
    path: '/',
    httpOnly: true,
    secure: app.config.cookieSecure,
    // The IdP's redirect back is a cross-site top-level GET: Lax lets the binding come along, Strict would not.
    sameSite: 'lax',
    signed: true,
    maxAge: BINDING_MAX_AGE_S,
  }
  const current = (request: FastifyRequest): string | undefined => {
    const raw = request.cookies?.[name]
    if (!raw) return undefined
    const unsigned = app.unsignCookie(raw)
    return unsigned.valid && unsigned.value !== null && /^[A-Za-z0-9_-]{43}$/.test(unsigned.value)
      ? unsigned.value
      : undefined
  }
  return {
    current,
    bind(request, reply) {
      const binding = current(request) ?? randomBytes(32).toString('base64url')
      reply.setCookie(name, binding, attributes)
      return hashSessionId(binding)
    },
    clear: (reply) => void reply.clearCookie(name, attributes),
  }
}
