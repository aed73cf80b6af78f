import { createHash } from 'node:crypto'

/**
 * The SHA-256 (base64url) of a credential: what the gateway keeps instead of a session id, a verified bearer
 * or a checked cookie, so no map or store holds something usable to sign in.
 */
export function credentialDigest(credential: string): string {
  return createHash('sha256').update(credential).digest('base64url')
}
