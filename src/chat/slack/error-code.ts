import type { ErrorCode } from '@slack/web-api'

// The SDK's error codes as strings, checked against its enum by the compiler: importing the enum's values would
// load the SDK into every gateway, Slack or not.
const PLATFORM: `${ErrorCode.PlatformError}` = 'slack_webapi_platform_error'
const HTTP: `${ErrorCode.HTTPError}` = 'slack_webapi_http_error'
const RATE_LIMITED: `${ErrorCode.RateLimitedError}` = 'slack_webapi_rate_limited_error'
const REQUEST: `${ErrorCode.RequestError}` = 'slack_webapi_request_error'

/** A Slack failure as a short code for logs, the ledger and the metrics: Slack's own, or ours. */
export function slackErrorCode(err: unknown): string {
  const e = err as { code?: unknown; data?: { error?: unknown }; statusCode?: unknown }
  if (e?.code === PLATFORM && typeof e.data?.error === 'string')
    return /^[a-z_]{1,64}$/.test(e.data.error) ? e.data.error : 'slack_error'
  if (e?.code === HTTP) return `http_${String(e.statusCode)}`
  if (e?.code === RATE_LIMITED) return 'ratelimited'
  if (e?.code === REQUEST) return 'unreachable'
  return 'slack_error'
}
