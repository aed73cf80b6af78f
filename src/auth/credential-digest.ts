import { hash } from 'node:crypto'

/**
 * The SHA-256 (base64url) of a credential: what the gateway keeps instead of a session id, a verified bearer
 * or a checked cookie, so no map or store holds something usable to sign in. One-shot `hash()`: half the
 * cost of a Hash object per request.
 */
export function credentialDigest(credential: string): string {
  return hash('sha256', credential, 'base64url')
}
