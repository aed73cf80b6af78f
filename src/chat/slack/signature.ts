import { createHmac, timingSafeEqual } from 'node:crypto'

/** How far a request's timestamp may be from the gateway's clock, either way (Slack's own advice). */
export const MAX_SKEW_S = 5 * 60

/** Why a request is not Slack's. */
export type SignatureRefusal = 'missing' | 'malformed' | 'stale' | 'mismatch'

/**
 * Checks Slack's request signature (version `v0`): `X-Slack-Signature` must be `v0=` and the hex HMAC-SHA256,
 * under the app's signing secret, of `v0:<X-Slack-Request-Timestamp>:<raw body>`, compared in constant time;
 * a timestamp more than five minutes off either way is refused before anything is computed. Returns why
 * not, or undefined when the request is Slack's.
 */
export function checkSlackSignature(input: {
  readonly secret: string
  readonly timestamp: string | undefined
  readonly signature: string | undefined
  readonly body: Buffer
  readonly nowS?: number
}): SignatureRefusal | undefined {
  const { timestamp, signature } = input
  if (timestamp === undefined || signature === undefined) return 'missing'
  if (!/^\d{1,12}$/.test(timestamp) || !/^v0=[0-9a-f]{64}$/.test(signature)) return 'malformed'
  const now = input.nowS ?? Math.floor(Date.now() / 1000)
  if (Math.abs(now - Number(timestamp)) > MAX_SKEW_S) return 'stale'
  const expected = createHmac('sha256', input.secret).update(`v0:${timestamp}:`).update(input.body).digest()
  const given = Buffer.from(signature.slice(3), 'hex')
  return timingSafeEqual(given, expected) ? undefined : 'mismatch'
}
