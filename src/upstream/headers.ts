import type { IncomingHttpHeaders } from 'node:http'
import { REQUEST_ID_HEADER } from '../http/request-id.ts'
import { TOKEN_HEADER } from './agent.ts'

/**
 * The request side of the header policy between a browser and a runtime (the answer side is
 * answer-policy.ts).
 *
 * An allowlist: a client header reaches the runtime only if it describes the request's content or what the
 * client accepts. Credentials (Authorization, Cookie, a client's own runtime token), hop-by-hop headers,
 * forwarding claims (X-Forwarded-*, Forwarded), browser context (Origin, Referer, Sec-Fetch-*), a client's
 * X-Request-ID and trace context (the gateway sets its own) and anything else never do. The gateway then sets its own forwarding headers, asks for an uncompressed answer (so it can
 * be checked for an echoed token) and sets the messaging token, after the client's Connection list has been
 * applied, so no client header can remove or replace them.
 */

/**
 * Client headers forwarded upstream (lower case). Content headers only travel with a body the gateway sends.
 * `last-event-id` is harmless on non-stream routes and lets the events proxy share this policy.
 */
export const FORWARDED_REQUEST_HEADERS: readonly string[] = [
  'accept',
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
  /** The request's id (X-Request-ID), so the runtime's logs can name the request the gateway logged. */
  requestId: string
  /** W3C `traceparent`/`tracestate` naming the gateway's upstream span (tracing/plugin.ts); may be empty. */
  trace: Readonly<Record<string, string>>
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
 * then X-Forwarded-For/Proto/Host, the request's X-Request-ID and trace context, `Accept-Encoding: identity`
 * and the messaging token, set last so nothing the client sent can override or drop them.
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
  out[REQUEST_ID_HEADER] = ctx.requestId
  // Never the client's own: the gateway's span, or a trusted proxy's context passed on (tracing/plugin.ts).
  if (ctx.trace.traceparent !== undefined) out.traceparent = ctx.trace.traceparent
  if (ctx.trace.tracestate !== undefined) out.tracestate = ctx.trace.tracestate
  out['accept-encoding'] = 'identity'
  out[TOKEN_HEADER] = ctx.token
  return out
}
