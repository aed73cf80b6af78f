import { createHmac } from 'node:crypto'
import type { Secret } from '../sessions/secret.ts'

/** The `X-Krg-Timestamp` of an attempt made at `nowMs`: Unix seconds, as Slack and Stripe send theirs. */
export function timestamp(nowMs = Date.now()): string {
  return String(Math.floor(nowMs / 1000))
}

/**
 * The `X-Krg-Signature` value of one attempt: `v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>` (the
 * attempt's `X-Krg-Timestamp`, a dot, the raw body bytes), as Slack and Stripe sign theirs. Signing the time
 * lets a receiver refuse a captured request replayed later (docs/notifications.md: the check a
 * receiver makes).
 */
export function signature(secret: Secret, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret.reveal()).update(`${timestamp}.`).update(body).digest('hex')}`
}
