import { KASM_ID } from '../sessions/types.ts'

/** What an audited request was aimed at, read from its URL alone (refusals happen before any route runs). */
export interface AuditTarget {
  kasmId: string | null
  route: string
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const V1_ROUTES = new Set(['messages', 'actions', 'attachments', 'requests', 'events', 'inbox', 'artifacts'])
const ADMIN_ROUTES = new Set(['sessions', 'unreadable-sessions', 'audit'])
/** Admin routes whose next segment is a session id. */
const ADMIN_SESSION_ROUTES = new Set(['sessions', 'unreadable-sessions'])
/** Sign-out and session routes, recorded when they write. */
const AUTH_WRITES = new Set(['logout', 'backchannel-logout', 'session'])

/**
 * The target of a write under `/desktop/` or `<basePath>admin/`, or of a sign-in or sign-out under
 * `<basePath>auth/`; null for anything the audit does not record (reads, other paths). Names come from
 * fixed lists, never from the URL text, so a record cannot carry arbitrary input.
 */
export function auditTarget(method: string, url: string, basePath = '/'): AuditTarget | null {
  const [rawPath = '', query = ''] = url.split('?', 2)
  let path = rawPath
  // The admin API lives under the base path; the v1 routes never do.
  if (basePath !== '/' && !path.startsWith('/desktop/')) {
    if (!path.startsWith(basePath)) return null
    path = path.slice(basePath.length - 1)
  }
  const segments = path.split('/')
  const [, area, id, ...rest] = segments
  if (area === 'auth' && rest.length === 0) return authTarget(method, id, query)
  if (!WRITE_METHODS.has(method)) return null
  if (area === 'desktop') {
    const kasmId = id !== undefined && KASM_ID.test(id) ? id : null
    // The sidebar's base is /desktop/<id>/mcp/; tolerate a gateway mounting the v1 routes without `mcp/`.
    return { kasmId, route: v1Route(rest[0] === 'mcp' ? rest.slice(1) : rest) }
  }
  if (area === 'admin') {
    const route = id !== undefined && ADMIN_ROUTES.has(id) ? `admin/${id}` : 'admin/unknown'
    const sessionId = id !== undefined && ADMIN_SESSION_ROUTES.has(id) ? rest[0] : undefined
    return { kasmId: sessionId !== undefined && KASM_ID.test(sessionId) ? sessionId : null, route }
  }
  return null
}

function v1Route(path: readonly string[]): string {
  const [first, second, third] = path
  if (first === 'runs') return third === 'messages' ? 'runs/messages' : 'runs'
  if (first === 'requests' && second !== undefined && third === 'cancel') return 'requests/cancel'
  return first !== undefined && V1_ROUTES.has(first) ? first : 'unknown'
}

/**
 * Sign-ins (the IdP's callback and the demo's one-time link, both GETs) and sign-outs. Starting a sign-in
 * (`auth/login` without a ticket) is not recorded: only its outcome at the callback is.
 */
function authTarget(method: string, name: string | undefined, query: string): AuditTarget | null {
  if (name === 'callback' && method === 'GET') return { kasmId: null, route: 'auth/callback' }
  if (name === 'login' && method === 'GET' && /(?:^|&)ticket=/.test(query))
    return { kasmId: null, route: 'auth/login' }
  if (name !== undefined && AUTH_WRITES.has(name) && WRITE_METHODS.has(method))
    return { kasmId: null, route: `auth/${name}` }
  return null
}
