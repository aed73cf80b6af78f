import type { FastifyRequest } from 'fastify'

/**
 * Through what a person answered a question or ended a handoff, as the audit records it: `console` (the
 * gateway's console page, which says so in {@link CLIENT_HEADER}), `sidebar` (a cookie request without it: the
 * runtime's bundled sidebar, or any other page signed in with the cookie), `api` (a bearer token), `slack` (set
 * by the Slack adapter through `request.auditDetail.via`, which always wins).
 */
export type Via = 'console' | 'sidebar' | 'api' | 'slack'

/** Every {@link Via}, for metrics that export each at 0. */
export const VIAS: readonly Via[] = ['console', 'sidebar', 'api', 'slack']

/** The header the console page sends on its calls (`X-Krg-Client: console`); never forwarded upstream. */
export const CLIENT_HEADER = 'x-krg-client'

/** The channel of an authenticated request, from its credential and the console's header. */
export function viaOf(request: FastifyRequest): Via {
  if (request.operator?.via !== 'cookie') return 'api'
  const client = request.headers[CLIENT_HEADER]
  return typeof client === 'string' && client.trim().toLowerCase() === 'console' ? 'console' : 'sidebar'
}
