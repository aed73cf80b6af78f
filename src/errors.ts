import createError, { type FastifyError } from '@fastify/error'

/**
 * Every error the gateway itself makes. Each has a stable `code` (the `error` field of the JSON body),
 * an HTTP status, and a message; pass `{ cause }` as the last argument when wrapping another error.
 *
 * Answers that come from a runtime are never turned into these: they pass through as sent.
 */

// Authentication (401) and authorisation (403)
export const Unauthenticated = createError(
  'unauthenticated',
  'no credential: send a bearer token or sign in',
  401,
)
export const InvalidCredential = createError('invalid_credential', 'credential refused: %s', 401)
export const Forbidden = createError('forbidden', 'your role does not allow this: %s', 403)
export const CsrfRefused = createError('csrf_refused', 'cross-site write refused: %s', 403)
export const SessionTokenOnly = createError(
  'session_token_only',
  'this route needs the runtime session token, which the gateway never holds',
  403,
)
export const JwksUnavailable = createError(
  'jwks_unavailable',
  'cannot fetch the signing keys to check your token',
  503,
)

// Sign-in through the identity provider (OIDC). A browser sees each as a page with a "sign in again" link;
// the code is in the audit record. Messages never echo what arrived in the callback URL.
export const SignInNotConfigured = createError(
  'signin_not_configured',
  'no identity provider is configured for sign-in',
  404,
)
export const SignInDenied = createError(
  'signin_denied',
  'the identity provider did not sign you in (%s)',
  403,
)
export const SignInStateInvalid = createError(
  'signin_state_invalid',
  'this sign-in does not match one started in this browser: %s',
  400,
)
export const SignInCodeInvalid = createError(
  'signin_code_invalid',
  'the identity provider refused the sign-in code: %s',
  400,
)
export const SignInTokenInvalid = createError(
  'signin_token_invalid',
  "the identity provider's ID token failed a check: %s",
  400,
)
export const IdpRefused = createError('idp_refused', 'the identity provider refused the gateway: %s', 502)
export const IdpUnavailable = createError('idp_unavailable', 'the identity provider cannot be reached', 503)
export const NoRole = createError(
  'no_role',
  'your identity provider signed you in as %s, but gives you no role on this gateway',
  403,
)
export const LogoutTokenInvalid = createError('logout_token_invalid', 'logout token refused: %s', 400)

// The request itself
export const BadRequest = createError('bad_request', '%s', 400)
export const SessionNotFound = createError('session_not_found', 'no such session', 404)
export const RouteNotFound = createError('route_not_found', 'no such route', 404)
export const PayloadTooLarge = createError('payload_too_large', 'body over the limit of %s bytes', 413)
export const UnsupportedMediaType = createError(
  'unsupported_media_type',
  'content type %s is not accepted here',
  415,
)
export const RateLimited = createError('rate_limited', 'too many requests; retry after %s seconds', 429)
export const TooManyStreams = createError('too_many_streams', 'you already hold %s event streams', 429)
export const TooManyFailedSignIns = createError(
  'signin_rate_limited',
  'too many failed sign-ins from your address; retry after %s seconds',
  429,
)

// Upstream (runtime) faults: the client is never at fault for these
export const UpstreamUnreachable = createError(
  'upstream_unreachable',
  'the session runtime cannot be reached',
  502,
)
export const UpstreamTokenRefused = createError(
  'upstream_token_refused',
  'the session runtime refused the gateway credential; an administrator must rotate the messaging token',
  502,
)
export const UpstreamTimeout = createError(
  'upstream_timeout',
  'the session runtime did not answer in time',
  504,
)

// Kasm's Developer API (launch, sync): Kasm's faults, never the client's
export const KasmNotConfigured = createError(
  'kasm_not_configured',
  'this gateway has no Kasm Developer API configured (GATEWAY_KASM_API_URL)',
  501,
)
export const KasmUnreachable = createError(
  'kasm_unreachable',
  "Kasm's Developer API cannot be reached: %s",
  502,
)
export const KasmRefused = createError('kasm_refused', 'Kasm refused %s: %s', 502)
export const KasmBadAnswer = createError(
  'kasm_bad_answer',
  'Kasm answered %s with something unusable: %s',
  502,
)
export const KasmLaunchTimeout = createError(
  'kasm_launch_timeout',
  'the Kasm session did not report its address within %s s; it was destroyed',
  504,
)

// The gateway's own state
export const NotReady = createError('not_ready', '%s', 503)
export const StoreUnavailable = createError('store_unavailable', 'shared state is unavailable: %s', 503)
export const ShuttingDown = createError('shutting_down', 'this replica is shutting down; retry', 503)

/** The JSON body of every gateway-made error. */
export interface ErrorBody {
  error: string
  message: string
}

const fastifyCodes: Record<string, { code: string; status: number }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', status: 413 },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type', status: 415 },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'bad_request', status: 400 },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'bad_request', status: 400 },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'bad_request', status: 400 },
  FST_ERR_VALIDATION: { code: 'bad_request', status: 400 },
  FST_ERR_NOT_FOUND: { code: 'route_not_found', status: 404 },
}

/**
 * Maps any thrown error to a status and the one error body shape. Unknown errors become a 500 whose
 * message says nothing of the internals (they are logged, not returned).
 */
export function toErrorBody(err: FastifyError | Error): { status: number; body: ErrorBody } {
  const e = err as FastifyError
  const known = e.code ? fastifyCodes[e.code] : undefined
  if (known) return { status: known.status, body: { error: known.code, message: e.message } }
  // @fastify/error upper-cases codes; ours are snake_case words, Fastify's own start with FST_ and never leak.
  const code = e.code?.toLowerCase()
  if (code && !code.startsWith('fst_') && /^[a-z_]+$/.test(code) && e.statusCode && e.statusCode >= 400) {
    return { status: e.statusCode, body: { error: code, message: e.message } }
  }
  if (e.statusCode === 429) return { status: 429, body: { error: 'rate_limited', message: e.message } }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    return { status: e.statusCode, body: { error: 'bad_request', message: e.message } }
  }
  return { status: 500, body: { error: 'internal', message: 'internal error' } }
}

/** A write that would fight another source of truth, e.g. the admin API changing a sessions-file session. */
export const SessionConflict = createError('session_conflict', '%s', 409)

// The console's questions ("I'm on it" marks, who answered)
export const QuestionTaken = createError('question_taken', '%s is already on this question', 409)
export const QuestionNotYours = createError('question_not_yours', 'someone else holds this question', 409)
export const QuestionClosed = createError('question_closed', 'this question is no longer open', 409)
export const AnswerUnknown = createError(
  'answer_unknown',
  'the gateway has no record of who answered this question (it may have been answered outside the gateway)',
  404,
)
