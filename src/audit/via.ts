/**
 * Decides a request's {@link Via}: `console` (the gateway's console page, which says so in
 * {@link CLIENT_HEADER}), `sidebar` (a cookie request without it: the runtime's bundled sidebar, or any other
 * page signed in with the cookie), `api` (a bearer token), or the chat the person answered from (`slack`, `msteams`:
 * the chat adapter's write as the person, whose credential says so).
 */
import type { FastifyRequest } from 'fastify'
import type { Via } from './types.ts'

/** The header the console page sends on its calls (`X-Krg-Client: console`); never forwarded upstream. */
export const CLIENT_HEADER = 'x-krg-client'

/** The channel of an authenticated request, from its credential and the console's header. */
export function viaOf(request: FastifyRequest): Via {
  const credential = request.operator?.via
  if (credential === 'slack' || credential === 'msteams') return credential
  if (credential !== 'cookie') return 'api'
  const client = request.headers[CLIENT_HEADER]
  return typeof client === 'string' && client.trim().toLowerCase() === 'console' ? 'console' : 'sidebar'
}
