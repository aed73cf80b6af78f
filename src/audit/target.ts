import type { FastifyRequest } from 'fastify'
import { KASM_ID } from '../sessions/types.ts'

/**
 * How a route names the audit records of its requests (its `config.audit`): a fixed name, or one decided per
 * request, null for a request that is not recorded. Names are fixed strings, never request input.
 */
export type AuditName = string | ((request: FastifyRequest) => string | null)

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's audit name: its requests are recorded under it, refusals before the handler included. */
    audit?: AuditName
  }
}

/** What an audited request was aimed at. */
export interface AuditTarget {
  kasmId: string | null
  route: string
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/**
 * The target of a request, or null when the audit does not record it. A route that names itself (route
 * `config.audit`) gives the name, and its `:kasmId` parameter the session. A request no route names (none
 * matched, a 404; or a route that declares no name) is recorded only when it writes under `/desktop/` (route
 * `unknown`, the session from the URL) or `<basePath>admin/` (route `admin/unknown`): every write there leaves a
 * record, even one no route serves, and a write route that forgot its name shows up as `unknown`.
 */
export function auditTarget(request: FastifyRequest, basePath: string): AuditTarget | null {
  const name = request.routeOptions.config.audit
  if (name === undefined) return unnamedTarget(request.method, request.url, basePath)
  // Fastify gives every GET route a HEAD twin with the same config: only the GET is a sign-in.
  if (request.method === 'HEAD') return null
  const route = typeof name === 'string' ? name : name(request)
  if (route === null) return null
  const { kasmId } = (request.params ?? {}) as { kasmId?: unknown }
  return { kasmId: typeof kasmId === 'string' && KASM_ID.test(kasmId) ? kasmId : null, route }
}

function unnamedTarget(method: string, url: string, basePath: string): AuditTarget | null {
  if (!WRITE_METHODS.has(method)) return null
  const [path = ''] = url.split('?', 1)
  const [, area, id] = path.split('/')
  if (area === 'desktop')
    return { kasmId: id !== undefined && KASM_ID.test(id) ? id : null, route: 'unknown' }
  // The admin API lives under the base path; the v1 routes never do.
  const inBase = basePath === '/' ? path : path.startsWith(basePath) ? path.slice(basePath.length - 1) : ''
  return inBase.split('/')[1] === 'admin' ? { kasmId: null, route: 'admin/unknown' } : null
}
