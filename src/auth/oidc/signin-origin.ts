import type { FastifyRequest } from 'fastify'

/** The query marker of a login already sent to the sign-in origin once (so a proxy's odd Host never loops). */
const MOVED = 'moved'

/**
 * A sign-in must start on the origin the identity provider returns to (the callback's, from
 * GATEWAY_OIDC_REDIRECT_URI or GATEWAY_PUBLIC_ORIGIN): the browser binding is a cookie, and a browser keeps
 * cookies per host, so one started at `127.0.0.1` cannot be finished at `localhost`. `auth/login` reached
 * at another host of this gateway is sent, with its query, to the same path on that origin before anything
 * else happens; null when it is there already.
 *
 * The host is the one the request names (its Host, or X-Forwarded-Host from a trusted proxy). A proxy that
 * rewrites it would make every request look like another host: the redirect carries a marker, and a
 * request that bears it is never sent again (the sign-in then goes on where it is, as before).
 */
export function signInElsewhere(request: FastifyRequest, signInOrigin: string): string | null {
  const expected = new URL(signInOrigin)
  let host: string
  try {
    host = new URL(`${expected.protocol}//${request.host}`).host
  } catch {
    return null
  }
  if (host === expected.host) return null
  const url = new URL(request.url, expected)
  if (url.searchParams.has(MOVED)) return null
  url.searchParams.set(MOVED, '1')
  return url.href
}
