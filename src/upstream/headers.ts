import type { IncomingHttpHeaders } from 'node:http'
import { TOKEN_HEADER } from './agent.ts'

/**
 * The header policy between a browser and a runtime, in both directions.
 *
 * Upstream is an allowlist: a client header reaches the runtime only if it describes the request's content or
 * what the client accepts. Credentials (Authorization, Cookie, a client's own runtime token), hop-by-hop
 * headers, forwarding claims (X-Forwarded-*, Forwarded), browser context (Origin, Referer, Sec-Fetch-*) and
 * anything else never do. The gateway then sets its own forwarding headers and the messaging token, after the
 * client's Connection list has been applied, so no client header can remove or replace them.
 *
 * Downstream is a denylist, because v1 is additive and a newer runtime may add headers the sidebar reads:
 * everything passes except hop-by-hop headers, cookies, the runtime token header, CORS and transport policy
 * (the gateway's own decisions), and any header whose value contains the messaging token.
 */

/**
 * Client headers forwarded upstream (lower case). Content headers only travel with a body the gateway sends.
 * `last-event-id` is harmless on non-stream routes and lets the events proxy share this policy.
 */
export const FORWARDED_REQUEST_HEADERS: readonly string[] = [
  'accept',
  'accept-encoding',
  'accept-language',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'last-event-id',
  'range',
  'user-agent',
]

/** Content headers, forwarded only when the gateway forwards a body. */
export const BODY_HEADERS: readonly string[] = ['content-type', 'content-length']

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus the legacy ones proxies still see. */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
])

/** Response headers that are the gateway's decision, or must never reach a browser from a runtime. */
const DROPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'set-cookie',
  'set-cookie2',
  TOKEN_HEADER,
  'www-authenticate',
  'strict-transport-security',
  'alt-svc',
  'access-control-allow-origin',
  'access-control-allow-credentials',
  'access-control-allow-headers',
  'access-control-allow-methods',
  'access-control-expose-headers',
  'access-control-max-age',
])

/** What the gateway knows about the client, for the forwarding headers it sets itself. */
export interface ForwardingContext {
  /** The messaging token (from `Secret.reveal()`), injected as {@link TOKEN_HEADER}. */
  token: string
  /** Whether the gateway sends a request body upstream (content headers travel only then). */
  hasBody: boolean
  /** The client address as the gateway determined it (honouring GATEWAY_TRUST_PROXY). */
  clientIp: string
  /** `http` or `https`, as the client reached the gateway. */
  protocol: string
  /** The Host the client addressed. */
  host: string
}

/** Header names listed in a Connection header (RFC 9110 §7.6.1), lower case. */
export function connectionListed(value: string | string[] | undefined): Set<string> {
  const out = new Set<string>()
  const values = Array.isArray(value) ? value : value === undefined ? [] : [value]
  for (const v of values) {
    for (const name of v.split(',')) {
      const n = name.trim().toLowerCase()
      if (n.length > 0) out.add(n)
    }
  }
  return out
}

function single(value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) return value.join(', ')
  return value
}

/**
 * The headers sent upstream: the allowlisted client headers (minus those the client named in Connection),
 * then X-Forwarded-For/Proto/Host and the messaging token, set last so nothing the client sent can override
 * or drop them.
 */
export function upstreamRequestHeaders(
  client: IncomingHttpHeaders,
  ctx: ForwardingContext,
): Record<string, string> {
  const listed = connectionListed(client.connection)
  const out: Record<string, string> = {}
  const names = ctx.hasBody ? [...FORWARDED_REQUEST_HEADERS, ...BODY_HEADERS] : FORWARDED_REQUEST_HEADERS
  for (const name of names) {
    if (listed.has(name)) continue
    const value = single(client[name])
    if (value !== undefined) out[name] = value
  }
  out['x-forwarded-for'] = ctx.clientIp
  out['x-forwarded-proto'] = ctx.protocol
  out['x-forwarded-host'] = ctx.host
  out[TOKEN_HEADER] = ctx.token
  return out
}

/**
 * The runtime's response headers as the client gets them: everything except hop-by-hop headers (and those the
 * runtime named in Connection), cookies, CORS/transport policy, the token header, and any header whose value
 * contains `token` (a runtime echoing the credential must not leak it).
 */
export function clientResponseHeaders(
  upstream: IncomingHttpHeaders,
  token: string,
): Record<string, string | string[]> {
  const listed = connectionListed(upstream.connection)
  const out: Record<string, string | string[]> = {}
  for (const [rawName, value] of Object.entries(upstream)) {
    if (value === undefined) continue
    const name = rawName.toLowerCase()
    if (HOP_BY_HOP.has(name) || listed.has(name) || DROPPED_RESPONSE_HEADERS.has(name)) continue
    if (name.startsWith('proxy-') || name.startsWith(':')) continue
    const values = Array.isArray(value) ? value : [value]
    if (token.length > 0 && values.some((v) => v.includes(token))) continue
    out[name] = value
  }
  return out
}
