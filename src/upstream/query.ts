import { BadRequest } from '../errors.ts'

/**
 * Query strings forwarded upstream: only the parameters a route knows, re-encoded. A credential in a query
 * (`token`, `kasm_runtime_token`) is never forwarded, whatever the route.
 */

/** Parameter names never forwarded, even on extra routes. */
const CREDENTIAL_PARAM = /token|secret|password|credential|auth/i
/** Parameter names accepted on extra (unknown to v1) read routes. */
const GENERIC_PARAM = /^[a-z][a-z0-9_]{0,31}$/
const MAX_VALUE_CHARS = 256
const MAX_GENERIC_PARAMS = 8

/** Which query parameters a route forwards: a fixed list, or any safe name (extra routes). */
export type QueryPolicy = readonly string[] | 'generic'

/**
 * The encoded query string (without `?`, possibly empty) to send upstream for `query` (Fastify's parsed
 * query) under `policy`. Unknown parameters are dropped silently (a sidebar may add its own, such as
 * `kasm_runtime_token`); a repeated parameter, or a value over 256 characters or with control characters,
 * is a 400.
 */
export function forwardedQuery(query: unknown, policy: QueryPolicy): string {
  if (query === null || typeof query !== 'object') return ''
  // Made only for a parameter that is forwarded: most requests have none.
  let out: URLSearchParams | undefined
  let generic = 0
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) {
    if (CREDENTIAL_PARAM.test(name)) continue
    if (policy === 'generic') {
      if (!GENERIC_PARAM.test(name)) continue
      if (++generic > MAX_GENERIC_PARAMS) throw new BadRequest('too many query parameters')
    } else if (!policy.includes(name)) {
      continue
    }
    if (typeof value !== 'string') throw new BadRequest(`query parameter ${name} must appear once`)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
    if (value.length > MAX_VALUE_CHARS || /[\u0000-\u001f\u007f]/.test(value)) {
      throw new BadRequest(`query parameter ${name} is not acceptable`)
    }
    out ??= new URLSearchParams()
    out.append(name, value)
  }
  return out === undefined ? '' : out.toString()
}
