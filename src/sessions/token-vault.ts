import {
  base64url,
  CompactEncrypt,
  calculateJwkThumbprint,
  compactDecrypt,
  decodeProtectedHeader,
} from 'jose'
import { Secret } from './secret.ts'

/** Why a sealed record does not open; readiness, logs and the admin API report it, never the record. */
export type UnsealFailure =
  /** Not a compact JWE of ours at all (cut, garbled, another format). */
  | 'malformed'
  /** Sealed with a key whose `kid` is not among the configured keys. */
  | 'unknown_key'
  /** The key matched (or, for a record without `kid`, none did) but the tag did not verify: tampered. */
  | 'undecryptable'
  /** It opened, but it is bound to another session: a ciphertext copied from one record to another. */
  | 'wrong_session'

/** Thrown when a stored token cannot be decrypted: wrong key, tampered record, or a record of another session. */
export class TokenVaultError extends Error {
  override readonly name = 'TokenVaultError'
  readonly reason: UnsealFailure

  constructor(message: string, reason: UnsealFailure, options?: { cause?: unknown }) {
    super(message, options)
    this.reason = reason
  }
}

/** What {@link TokenVault.unseal} found out about a record besides its token. */
export interface Unsealed {
  readonly secret: Secret
  /** The `kid` the record names; null for a record sealed by 0.1.0, which named none. */
  readonly kid: string | null
  /** Whether it is sealed with the first (sealing) key; false means it should be sealed again. */
  readonly current: boolean
}

interface VaultKey {
  readonly kid: string
  readonly key: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const ALGORITHMS = { keyManagementAlgorithms: ['dir'], contentEncryptionAlgorithms: ['A256GCM'] }
const KEY_PATTERN = /^[A-Za-z0-9_-]{43}$/

/**
 * Encrypts messaging tokens at rest (the Redis session store) as compact JWE, `dir` + `A256GCM`, with the
 * keys of GATEWAY_ENCRYPTION_KEY: the first seals, every one opens, so a key can be rotated without
 * downtime. Each record names its key in the protected header (`kid`: the key's RFC 7638 JWK thumbprint, a
 * one-way hash, never the key), so opening goes straight to that key. The session id goes into the protected
 * header too, which AES-GCM authenticates: a ciphertext copied onto another session's record fails to open
 * instead of handing that session someone else's token, and neither header field can be edited unnoticed.
 * Nothing of the token is readable from a Redis dump.
 */
export class TokenVault {
  readonly #keys: Promise<readonly VaultKey[]>

  /** `keys`: 32 bytes each, the sealing key first; use {@link TokenVault.fromBase64url} for the configured value. */
  constructor(keys: Uint8Array | readonly Uint8Array[]) {
    const list = keys instanceof Uint8Array ? [keys] : [...keys]
    if (list.length === 0) throw new TokenVaultError('at least one encryption key is required', 'malformed')
    for (const key of list) {
      if (key.length !== 32) throw new TokenVaultError('the encryption key must be 32 bytes', 'malformed')
    }
    const seen = new Set(list.map((key) => Buffer.from(key).toString('base64url')))
    if (seen.size !== list.length) throw new TokenVaultError('an encryption key is listed twice', 'malformed')
    this.#keys = Promise.all(
      list.map(async (key) => ({
        key,
        kid: await calculateJwkThumbprint({ kty: 'oct', k: base64url.encode(key) }, 'sha256'),
      })),
    )
  }

  /** From GATEWAY_ENCRYPTION_KEY: 43 base64url characters (32 bytes, no padding) each, as a list or comma list. */
  static fromBase64url(value: string | readonly string[]): TokenVault {
    const list = typeof value === 'string' ? value.split(',').map((s) => s.trim()) : value
    return new TokenVault(
      list.map((item, i) => {
        if (!KEY_PATTERN.test(item))
          throw new TokenVaultError(`encryption key ${i + 1} must be 32 bytes, base64url`, 'malformed')
        return Buffer.from(item, 'base64url')
      }),
    )
  }

  /** The `kid` of every configured key, the sealing key first. */
  async kids(): Promise<string[]> {
    return (await this.#keys).map((k) => k.kid)
  }

  /** The `kid` records are sealed with now. */
  async sealingKid(): Promise<string> {
    return ((await this.#keys)[0] as VaultKey).kid
  }

  /** The token as a compact JWE bound to `kasmId`, sealed with the first key. */
  async seal(kasmId: string, token: Secret): Promise<string> {
    const { kid, key } = (await this.#keys)[0] as VaultKey
    return new CompactEncrypt(encoder.encode(token.reveal()))
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid, sid: kasmId })
      .encrypt(key)
  }

  /** The token of `kasmId` from its JWE; throws {@link TokenVaultError} on any mismatch. */
  async open(kasmId: string, jwe: string): Promise<Secret> {
    return (await this.unseal(kasmId, jwe)).secret
  }

  /**
   * Opens a record and says which key it is sealed with. A record naming a `kid` is tried with that key
   * only; one naming none (sealed by 0.1.0) with each key in order. Throws {@link TokenVaultError}.
   */
  async unseal(kasmId: string, jwe: string): Promise<Unsealed> {
    const keys = await this.#keys
    let kid: string | null
    try {
      const header = decodeProtectedHeader(jwe)
      kid = typeof header.kid === 'string' ? header.kid : null
    } catch (err) {
      throw new TokenVaultError('stored messaging token is not a sealed record', 'malformed', { cause: err })
    }
    const candidates = kid === null ? keys : keys.filter((k) => k.kid === kid)
    if (candidates.length === 0) {
      throw new TokenVaultError(
        `stored messaging token is sealed with key ${kid}, which is not in GATEWAY_ENCRYPTION_KEY`,
        'unknown_key',
      )
    }
    let lastError: unknown
    for (const candidate of candidates) {
      let result: Awaited<ReturnType<typeof compactDecrypt>>
      try {
        result = await compactDecrypt(jwe, candidate.key, ALGORITHMS)
      } catch (err) {
        lastError = err
        continue
      }
      if (result.protectedHeader.sid !== kasmId) {
        throw new TokenVaultError('stored messaging token belongs to another session', 'wrong_session')
      }
      return {
        secret: new Secret(decoder.decode(result.plaintext)),
        kid,
        current: kid === (keys[0] as VaultKey).kid,
      }
    }
    throw new TokenVaultError(
      kid === null
        ? 'stored messaging token cannot be decrypted with any GATEWAY_ENCRYPTION_KEY'
        : 'stored messaging token fails its integrity check (tampered record?)',
      'undecryptable',
      { cause: lastError },
    )
  }
}
