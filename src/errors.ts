import createError, { type FastifyError } from '@fastify/error'

/**
 * Every error the gateway itself makes. Each has a stable `code` (the `error` field of the JSON body),
 * an HTTP status, and a message; pass `{ cause }` as the last argument when wrapping another error.
 *
 * Answers that come from a runtime are never turned into these: they pass through as sent.
 */

/**
 * The base of every error below: {@link toErrorBody} answers an instance with its own code, status and message,
 * and anything else (Fastify's, a plugin's, a bug) by its tables or as a bare 500.
 */
export class GatewayError extends Error {}

/** `createError` on the {@link GatewayError} base; the code is given snake_case (@fastify/error upper-cases it). */
function gatewayError<C extends string, SC extends number>(code: C, message: string, status: SC) {
  return createError(code, message, status, GatewayError as ErrorConstructor)
}

// Authentication (401) and authorisation (403)
export const Unauthenticated = gatewayError(
  'unauthenticated',
  'no credential: send a bearer token or sign in',
  401,
)
export const InvalidCredential = gatewayError('invalid_credential', 'credential refused: %s', 401)
export const Forbidden = gatewayError('forbidden', 'your role does not allow this: %s', 403)
export const CsrfRefused = gatewayError('csrf_refused', 'cross-site write refused: %s', 403)
export const SessionTokenOnly = gatewayError(
  'session_token_only',
  'this route needs the runtime session token, which the gateway never holds',
  403,
)
export const JwksUnavailable = gatewayError(
  'jwks_unavailable',
  'cannot fetch the signing keys to check your token',
  503,
)

// Sign-in through the identity provider (OIDC). A browser sees each as a page with a "sign in again" link;
// the code is in the audit record. Messages never echo what arrived in the callback URL.
export const SignInNotConfigured = gatewayError(
  'signin_not_configured',
  'no identity provider is configured for sign-in',
  404,
)
export const SignInDenied = gatewayError(
  'signin_denied',
  'the identity provider did not sign you in (%s)',
  403,
)
export const SignInStateInvalid = gatewayError(
  'signin_state_invalid',
  'this sign-in does not match one started in this browser: %s',
  400,
)
export const SignInCodeInvalid = gatewayError(
  'signin_code_invalid',
  'the identity provider refused the sign-in code: %s',
  400,
)
export const SignInTokenInvalid = gatewayError(
  'signin_token_invalid',
  "the identity provider's ID token failed a check: %s",
  400,
)
export const IdpRefused = gatewayError('idp_refused', 'the identity provider refused the gateway: %s', 502)
export const IdpUnavailable = gatewayError('idp_unavailable', 'the identity provider cannot be reached', 503)
export const NoRole = gatewayError(
  'no_role',
  'your identity provider signed you in as %s, but gives you no role on this gateway',
  403,
)
export const LogoutTokenInvalid = gatewayError('logout_token_invalid', 'logout token refused: %s', 400)

// The request itself
export const BadRequest = gatewayError('bad_request', '%s', 400)
export const SessionNotFound = gatewayError('session_not_found', 'no such session', 404)
export const RouteNotFound = gatewayError('route_not_found', 'no such route', 404)
const PayloadTooLargeError = gatewayError('payload_too_large', 'body over the limit of %s bytes', 413)
/**
 * A request body over a byte limit. Its answer carries the limit as a number (`limit`, bytes) besides the
 * message, so a client can say how far over it was (the console: "the message is 70 KB, over the 64 KB limit").
 */
export class PayloadTooLarge extends PayloadTooLargeError {
  readonly limit: number

  constructor(limit: number, options?: { cause: unknown }) {
    super(String(limit), ...(options === undefined ? [] : [options]))
    this.limit = limit
  }
}
export const UnsupportedMediaType = gatewayError(
  'unsupported_media_type',
  'content type %s is not accepted here',
  415,
)
export const RateLimited = gatewayError('rate_limited', 'too many requests; retry after %s seconds', 429)
export const TooManyStreams = gatewayError(
  'too_many_streams',
  'you already hold %s event streams (the most one person may open)',
  429,
)
export const AnonymousRateLimited = gatewayError(
  'anonymous_rate_limited',
  'too many requests without a credential from your address; sign in, or retry after %s seconds',
  429,
)
export const TooManyFailedSignIns = gatewayError(
  'signin_rate_limited',
  'too many failed sign-ins from your address; retry after %s seconds',
  429,
)

// Upstream (runtime) faults: the client is never at fault for these
export const UpstreamUnreachable = gatewayError(
  'upstream_unreachable',
  'the session runtime cannot be reached',
  502,
)
export const UpstreamTokenRefused = gatewayError(
  'upstream_token_refused',
  'the session runtime refused the gateway credential; an administrator must rotate the messaging token',
  502,
)
export const UpstreamTimeout = gatewayError(
  'upstream_timeout',
  'the session runtime did not answer in time',
  504,
)
/** The URL policy refused the address the session's upstream resolves to now (DNS rebinding, a narrower list). */
export const UpstreamAddressRefused = gatewayError(
  'upstream_address_refused',
  'the session runtime resolves to an address the gateway may not connect to',
  502,
)
/** A runtime's 3xx: a redirect from the gateway's origin would be an open redirect to wherever it points. */
export const UpstreamRedirect = gatewayError(
  'upstream_redirect',
  'the session runtime answered with a redirect, which the gateway does not follow or pass on',
  502,
)
/** An answer the gateway cannot pass on safely (e.g. compressed although identity was asked for). */
export const UpstreamBadAnswer = gatewayError(
  'upstream_bad_answer',
  'the session runtime sent an answer the gateway cannot pass on: %s',
  502,
)

// Upstreams given through the admin API (upstream/url-policy.ts)
export const UpstreamNotAllowed = gatewayError('upstream_not_allowed', 'upstream: %s', 400)
export const UpstreamConflict = gatewayError(
  'upstream_conflict',
  'upstream: already registered for a session of another team',
  409,
)

// Kasm's Developer API (launch, sync): Kasm's faults, never the client's
export const KasmNotConfigured = gatewayError(
  'kasm_not_configured',
  'this gateway has no Kasm Developer API configured (GATEWAY_KASM_API_URL)',
  501,
)
export const KasmUnreachable = gatewayError(
  'kasm_unreachable',
  "Kasm's Developer API cannot be reached: %s",
  502,
)
export const KasmRefused = gatewayError('kasm_refused', 'Kasm refused %s: %s', 502)
export const KasmBadAnswer = gatewayError(
  'kasm_bad_answer',
  'Kasm answered %s with something unusable: %s',
  502,
)
/** `DELETE /admin/sessions/<launched>`: Kasm did not destroy the session, so its registration stays. */
export const KasmDestroyFailed = gatewayError(
  'kasm_destroy_failed',
  '%s; the session still runs in Kasm and stays registered: retry, or end it in Kasm and delete it again (or let the Kasm sync remove it)',
  502,
)
/** A launch's `user_id` that the team's admins may not choose (GATEWAY_KASM_TEAMS_FILE `userIds`). */
export const KasmUserRefused = gatewayError('kasm_user_refused', 'user_id: %s', 403)
/** No Kasm user to launch a team's sessions as: neither GATEWAY_KASM_USER_ID nor the team's `kasmUserId`. */
export const KasmUserNotConfigured = gatewayError(
  'kasm_user_not_configured',
  "no Kasm user is configured to launch team %s's sessions as: set GATEWAY_KASM_USER_ID, or kasmUserId for the team in GATEWAY_KASM_TEAMS_FILE",
  501,
)
/** A launch `environment` variable no launch may set, or that the team's allowlist does not name. */
export const EnvironmentRefused = gatewayError('environment_refused', 'environment: %s', 400)
export const KasmLaunchTimeout = gatewayError(
  'kasm_launch_timeout',
  'the Kasm session did not report its address within %s s; it was destroyed',
  504,
)

// The gateway's own state
export const NotReady = gatewayError('not_ready', '%s', 503)
export const StoreUnavailable = gatewayError('store_unavailable', 'shared state is unavailable: %s', 503)
/**
 * A replica that cannot open every stored session record refuses registry writes: it would seal them with a
 * key the other replicas may not have (cluster mode; see docs/cluster.md).
 */
export const RegistryUnreadable = gatewayError(
  'registry_unreadable',
  'this replica cannot open %s, so it takes no registry writes (they would be sealed with a key the other replicas may not have): send the change to another replica, or fix the key or delete the records (GET /admin/unreadable-sessions)',
  503,
)
export const ShuttingDown = gatewayError('shutting_down', 'this replica is shutting down; retry', 503)
/** Load shedding (http/load-shedding): event-loop delay or heap over its threshold. */
export const Overloaded = gatewayError('overloaded', 'this replica is overloaded; retry shortly', 503)
/** A connection accepted past the replica's cap (http/connection-limit): answered, then closed. */
export const TooManyConnections = gatewayError(
  'too_many_connections',
  'this replica has as many connections as it takes; retry shortly',
  503,
)

/** The code and message of every gateway-made error. */
export interface ErrorBody {
  error: string
  message: string
  /** The byte limit a body went over (payload_too_large from {@link PayloadTooLarge}). */
  limit?: number
}

/**
 * The JSON body of an error answer: {@link ErrorBody} and the request's id (also its X-Request-ID header),
 * which a person quotes and an operator finds in the log line and the audit record.
 */
export interface ErrorAnswer extends ErrorBody {
  requestId: string
}

/**
 * Fastify's own errors, each with our code and a fixed message: theirs may quote the URL, a header or part of
 * the body (a JSON parse error quotes the bytes it choked on), and an answer must never echo what was sent.
 * Validation messages (ajv) name the schema's rule, never the value, and are kept.
 */
const fastifyCodes: Record<string, { code: string; status: number; message?: string }> = {
  FST_ERR_BAD_URL: { code: 'bad_request', status: 400, message: 'the URL is not validly encoded' },
  FST_ERR_MAX_PARAM_LENGTH: { code: 'url_too_long', status: 414, message: 'a path segment is too long' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', status: 413, message: 'body over the limit' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    status: 415,
    message: 'this content type is not accepted here',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'bad_request', status: 400, message: 'the JSON body is empty' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'bad_request', status: 400, message: 'body is not valid JSON' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'bad_request',
    status: 400,
    message: 'the body does not match its Content-Length',
  },
  FST_ERR_VALIDATION: { code: 'bad_request', status: 400 },
  FST_ERR_NOT_FOUND: { code: 'route_not_found', status: 404, message: 'no such route' },
}

/** A message for a client error nobody gave a code, by status; the error's own message is never used. */
const statusMessages: Record<number, string> = {
  400: 'bad request',
  404: 'no such route',
  405: 'method not allowed',
  408: 'the request took too long',
  413: 'body over the limit',
  414: 'URL too long',
  415: 'this content type is not accepted here',
  431: 'request headers too large',
}

/**
 * Maps any thrown error to a status and the one error body shape `{error, message}` (with `limit`, the route's
 * `bodyLimit` when given, on a body over it, as the proxied routes' 413 has it): the gateway's own errors
 * ({@link GatewayError}s) as they are, Fastify's and its plugins' by the tables here. Unknown errors become a 500 whose
 * message says nothing of the internals (they are logged, not returned). Browser navigations may render the
 * same code and message as a page; the code and status come from here either way.
 */
export function toErrorBody(
  err: FastifyError | Error,
  bodyLimit?: number,
): { status: number; body: ErrorBody } {
  const e = err as FastifyError
  const known = e.code ? fastifyCodes[e.code] : undefined
  if (known) {
    const body: ErrorBody = { error: known.code, message: known.message ?? e.message }
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' && bodyLimit !== undefined) body.limit = bodyLimit
    return { status: known.status, body }
  }
  if (err instanceof GatewayError) {
    const body: ErrorBody = { error: e.code.toLowerCase(), message: e.message }
    if (err instanceof PayloadTooLarge) body.limit = err.limit
    return { status: e.statusCode ?? 500, body }
  }
  if (e.statusCode === 429)
    return { status: 429, body: { error: 'rate_limited', message: 'too many requests' } }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    const message = statusMessages[e.statusCode] ?? 'bad request'
    return { status: e.statusCode, body: { error: 'bad_request', message } }
  }
  return { status: 500, body: { error: 'internal', message: 'internal error' } }
}

/**
 * The raw answer to a request node's HTTP parser refused before Fastify saw it (malformed request line or
 * headers, headers too large, a request timeout), in the same `{error, message}` shape; null when nothing can
 * be sent (the connection was reset).
 */
export function clientErrorAnswer(err: NodeJS.ErrnoException): Buffer | null {
  if (err.code === 'ECONNRESET') return null
  const [status, reason, body]: [number, string, ErrorBody] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          { error: 'headers_too_large', message: 'request headers too large' },
        ]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', { error: 'request_timeout', message: 'the request took too long' }]
        : [400, 'Bad Request', { error: 'bad_request', message: 'malformed HTTP request' }]
  const json = JSON.stringify(body)
  return Buffer.from(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  )
}

/** A write that would fight another source of truth, e.g. the admin API changing a sessions-file session. */
export const SessionConflict = gatewayError('session_conflict', '%s', 409)

// The console's questions ("I'm on it" marks, who answered)
export const QuestionTaken = gatewayError('question_taken', '%s is already on this question', 409)
export const QuestionNotYours = gatewayError('question_not_yours', 'someone else holds this question', 409)
export const QuestionClosed = gatewayError('question_closed', 'this question is no longer open', 409)
export const AnswerUnknown = gatewayError(
  'answer_unknown',
  'the gateway has no record of who answered this question (it may have been answered outside the gateway)',
  404,
)

// The team report
export const ReportWindowInvalid = gatewayError('report_window_invalid', 'window must be one of 24h, 7d', 400)
export const TeamNotFound = gatewayError('team_not_found', 'no such team', 404)
// Slack (src/chat/slack): interaction payloads that are not Slack's, and linking a Slack account
export const SlackSignatureInvalid = gatewayError(
  'slack_signature_invalid',
  'this is not a request signed by Slack: %s',
  401,
)
export const SlackRequestStale = gatewayError(
  'slack_request_stale',
  "the request's timestamp is more than 5 minutes from the gateway's clock",
  401,
)
export const SlackSignatureRateLimited = gatewayError(
  'slack_signature_rate_limited',
  'too many requests from your address were not signed by Slack; retry after %s seconds',
  429,
)
export const SlackRequestReplayed = gatewayError(
  'slack_request_replayed',
  'this signed request was received already',
  409,
)
// Microsoft Teams (src/chat/msteams): the messaging endpoint takes only activities the Bot Framework signed for
// this bot, from our tenant; the reason of a refusal is logged and counted, never told.
export const MsteamsUnauthorized = gatewayError(
  'msteams_unauthorized',
  'this is not an activity the Bot Framework signed for this bot and tenant',
  401,
)
export const MsteamsUnauthorizedRateLimited = gatewayError(
  'msteams_unauthorized_rate_limited',
  'too many activities from your address were not signed by the Bot Framework for this bot; retry after %s seconds',
  429,
)
export const MsteamsKeysUnavailable = gatewayError(
  'msteams_keys_unavailable',
  "cannot read the Bot Framework's signing keys to check this activity",
  503,
)
export const ChatLinkInvalid = gatewayError(
  'chat_link_invalid',
  'this link to connect your chat account %s',
  400,
)
export const ChatLinkMismatch = gatewayError(
  'chat_link_mismatch',
  'you signed in to Slack as another user than the one this link connects: %s',
  403,
)
export const ChatLinkDeclined = gatewayError(
  'chat_link_declined',
  'the Slack user this link names answered “This is not me” in Slack',
  409,
)
export const ChatLinkCodeWrong = gatewayError(
  'chat_link_code_wrong',
  'that is not the code sent in Slack; %s more tries',
  400,
)
export const ChatLinkNotSent = gatewayError(
  'chat_link_not_sent',
  'Slack did not take the message with the code (%s)',
  502,
)
export const ChatLinkNotFound = gatewayError('chat_link_not_found', 'no such linked chat account', 404)
export const ChatSignInUnavailable = gatewayError(
  'chat_signin_unavailable',
  'Slack did not sign you in: %s',
  502,
)
