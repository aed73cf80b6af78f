import type { IncomingHttpHeaders } from 'node:http'
import {
  BadRequest,
  PayloadTooLarge,
  UpstreamAddressRefused,
  UpstreamBadAnswer,
  UpstreamRedirect,
  UpstreamTimeout,
  UpstreamTokenRefused,
  UpstreamUnreachable,
} from '../errors.ts'
import { ADDRESS_REFUSED } from './url-policy.ts'

/**
 * The one place where upstream failures become gateway errors: transport errors (the runtime could not be
 * reached or did not answer in time) and the few runtime answers that mean the gateway, not the client, is
 * at fault. Everything else the runtime answers passes through as sent.
 */

/** The `reason` label of `krg_upstream_errors_total` for a failure. */
export type FailureReason =
  | 'unreachable'
  | 'timeout'
  | 'token_refused'
  | 'redirect'
  | 'bad_answer'
  | 'address_refused'

/** A gateway error to answer with, and the metric reason when the runtime (not the client) is at fault. */
export interface Failure {
  readonly error: Error
  readonly reason?: FailureReason
}

const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'ETIMEDOUT',
])

const UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
])

/** The error itself, then its `cause` chain and an AggregateError's members (happy-eyeballs connects). */
function* chain(err: unknown): Generator<{ code?: unknown }> {
  const seen = new Set<unknown>()
  const queue: unknown[] = [err]
  while (queue.length > 0) {
    const e = queue.shift()
    if (e === null || typeof e !== 'object' || seen.has(e)) continue
    seen.add(e)
    yield e as { code?: unknown }
    queue.push((e as { cause?: unknown }).cause)
    if (e instanceof AggregateError) queue.push(...e.errors)
  }
}

/**
 * Translates an error raised while forwarding (undici's, possibly wrapped by @fastify/reply-from, or the
 * upload's own byte limit) into the error to answer with:
 * - the upload crossed its limit mid-stream: 413 payload_too_large (the upstream request was aborted);
 * - the body ended before its Content-Length: 400 bad_request;
 * - the URL policy refused the address the upstream resolves to: 502 upstream_address_refused;
 * - a connect or header timeout: 504 upstream_timeout;
 * - refused, reset, unresolvable, closed: 502 upstream_unreachable;
 * - anything else is a gateway bug and is returned as is (rendered as a 500 and logged).
 */
export function transportFailure(err: unknown): Failure {
  const codes: string[] = []
  for (const e of chain(err)) {
    if (e instanceof PayloadTooLarge) return { error: e }
    if (typeof e.code === 'string') codes.push(e.code)
  }
  if (codes.includes(ADDRESS_REFUSED))
    return { error: new UpstreamAddressRefused({ cause: err }), reason: 'address_refused' }
  if (codes.includes('UND_ERR_REQ_CONTENT_LENGTH_MISMATCH'))
    return { error: new BadRequest('the body did not match its Content-Length') }
  if (codes.some((c) => TIMEOUT_CODES.has(c)))
    return { error: new UpstreamTimeout({ cause: err }), reason: 'timeout' }
  if (codes.some((c) => UNREACHABLE_CODES.has(c)))
    return { error: new UpstreamUnreachable({ cause: err }), reason: 'unreachable' }
  return { error: err instanceof Error ? err : new Error(String(err)) }
}

/**
 * A body that broke off before its end (read whole before it is sent, so nothing reached the client yet): a
 * lost connection is the runtime unreachable, anything else (fewer bytes than its Content-Length) a bad answer.
 */
export function bodyFailure(err: unknown): Failure {
  const failure = transportFailure(err)
  if (failure.reason !== undefined) return failure
  return {
    error: new UpstreamBadAnswer('a body that ended before its length', { cause: err }),
    reason: 'bad_answer',
  }
}

function isJson(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type']
  return typeof type === 'string' && /^application\/(?:[\w.+-]+\+)?json\b/i.test(type.trim())
}

/**
 * Whether an answer from upstream must not pass through, and what to answer instead:
 * - 3xx but 304: a redirect from the gateway's origin would send an operator wherever the runtime points
 *   (an open redirect), and v1 defines none: 502 upstream_redirect.
 * - a body compressed although the gateway asked for identity: it could not be checked for an echoed token
 *   (token-echo.ts): 502 upstream_bad_answer.
 * - 401 or 403: every forwarded route accepts the messaging token (the session-token-only ones are never
 *   forwarded), so the runtime refused the gateway's credential, not the client: 502 upstream_token_refused.
 * - 502 or 504: the runtime never answers these itself (v1 defines none); it is Kasm's proxy answering because
 *   the runtime is not up, or not answering it: 502 upstream_unreachable, 504 upstream_timeout.
 * - 503 without a JSON body: Kasm's proxy again. The runtime's own 503s (a gated read with no token
 *   configured, a run's history that cannot be read) are JSON and pass through.
 */
export function answerFailure(status: number, headers: IncomingHttpHeaders): Failure | undefined {
  if (status === 401 || status === 403) return { error: new UpstreamTokenRefused(), reason: 'token_refused' }
  if (status === 502 || (status === 503 && !isJson(headers)))
    return { error: new UpstreamUnreachable(), reason: 'unreachable' }
  if (status === 504) return { error: new UpstreamTimeout(), reason: 'timeout' }
  if (status >= 300 && status < 400 && status !== 304)
    return { error: new UpstreamRedirect(), reason: 'redirect' }
  const encoding = headers['content-encoding']
  if (encoding !== undefined && String(encoding).trim().toLowerCase() !== 'identity')
    return { error: new UpstreamBadAnswer('a compressed body'), reason: 'bad_answer' }
  return undefined
}
