import { createHmac } from 'node:crypto'
import type { Secret } from '../sessions/secret.ts'

/**
 * The `X-Krg-Signature` value of a body: `sha256=` and the hex HMAC-SHA256 of the raw bytes, as GitHub signs
 * its webhooks, so receivers can check it with the same code (in constant time).
 */
export function signature(secret: Secret, body: string): string {
  return `sha256=${createHmac('sha256', secret.reveal()).update(body).digest('hex')}`
}
