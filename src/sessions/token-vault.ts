import { CompactEncrypt, compactDecrypt } from 'jose'
import { Secret } from './secret.ts'

/** Thrown when a stored token cannot be decrypted: wrong key, tampered record, or a record of another session. */
export class TokenVaultError extends Error {
  override readonly name = 'TokenVaultError'
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Encrypts messaging tokens at rest (the Redis session store) as compact JWE, `dir` + `A256GCM`, with the
 * 32-byte GATEWAY_ENCRYPTION_KEY. The session id goes into the protected header, which AES-GCM
 * authenticates: a ciphertext copied onto another session's record fails to decrypt instead of handing that
 * session someone else's token. Nothing of the token is readable from a Redis dump.
 */
export class TokenVault {
  readonly #key: Uint8Array

  /** `key` is 32 bytes; use {@link TokenVault.fromBase64url} for the configured value. */
  constructor(key: Uint8Array) {
    if (key.length !== 32) throw new TokenVaultError('the encryption key must be 32 bytes')
    this.#key = key
  }

  /** From GATEWAY_ENCRYPTION_KEY: 43 base64url characters (32 bytes, no padding). */
  static fromBase64url(value: string): TokenVault {
    if (!/^[A-Za-z0-9_-]{43}$/.test(value))
      throw new TokenVaultError('the encryption key must be 32 bytes, base64url')
    return new TokenVault(Buffer.from(value, 'base64url'))
  }

  /** The token as a compact JWE bound to `kasmId`. */
  async seal(kasmId: string, token: Secret): Promise<string> {
    return new CompactEncrypt(encoder.encode(token.reveal()))
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', sid: kasmId })
      .encrypt(this.#key)
  }

  /** The token of `kasmId` from its JWE; throws {@link TokenVaultError} on any mismatch. */
  async open(kasmId: string, jwe: string): Promise<Secret> {
    let result: Awaited<ReturnType<typeof compactDecrypt>>
    try {
      result = await compactDecrypt(jwe, this.#key, {
        keyManagementAlgorithms: ['dir'],
        contentEncryptionAlgorithms: ['A256GCM'],
      })
    } catch (err) {
      throw new TokenVaultError(
        'stored messaging token cannot be decrypted (wrong GATEWAY_ENCRYPTION_KEY?)',
        {
          cause: err,
        },
      )
    }
    if (result.protectedHeader.sid !== kasmId) {
      throw new TokenVaultError('stored messaging token belongs to another session')
    }
    return new Secret(decoder.decode(result.plaintext))
  }
}
