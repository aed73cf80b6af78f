import { createSecretKey } from 'node:crypto'
import {
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  jwtVerify,
} from 'jose'
import { ConfigError } from '../config.ts'
import { VerifiedTokens } from './verified-tokens.ts'

/** Why a bearer token was refused; also the `reason` label of `krg_auth_failures_total`. */
export type TokenRefusalReason =
  | 'malformed'
  | 'expired'
  | 'not_yet_valid'
  | 'bad_signature'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'missing_claim'
  | 'invalid_claim'
  | 'alg'
  | 'unknown_key'
  | 'jwks_unavailable'

/**
 * A refused token. `message` is safe to return to the client: it names the failed check in general
 * terms and never echoes the token or its claims.
 */
export class TokenRefused extends Error {
  readonly reason: TokenRefusalReason
  override readonly name = 'TokenRefused'
  constructor(reason: TokenRefusalReason, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.reason = reason
  }
}

/** The last second a JavaScript Date can show as ISO 8601 with a four-digit year (9999-12-31T23:59:59Z). */
const MAX_NUMERIC_DATE = 253_402_300_799

/** How bearer tokens are checked; built from `GATEWAY_JWT_*` and `GATEWAY_JWKS_*`. */
export interface TokenVerifierOptions {
  /** HS256 shared secret. */
  secret?: string
  /** Remote JWKS for asymmetric tokens. */
  jwksUrl?: string
  /** Algorithms accepted with the JWKS; asymmetric only. */
  jwksAlgorithms: readonly string[]
  jwksTimeoutMs: number
  issuer?: string
  audience?: string
  clockToleranceS: number
  /** How many verified tokens are kept (see {@link VerifiedTokens}); 0 verifies every request. */
  cacheSize?: number
}

/** Tokens kept verified by default: one per person active in the last minutes, for thousands of people. */
const DEFAULT_CACHE_SIZE = 10_000

/**
 * How long a token verified with a key from the JWKS is used before it is verified again: jose keeps fetched
 * keys for ten minutes, so a withdrawn key stops working about as soon as it did without the cache.
 */
const JWKS_REVERIFY_MS = 60_000

/** Verifies a compact JWT and returns its payload, or throws {@link TokenRefused}. */
export interface TokenVerifier {
  verify(token: string): Promise<JWTPayload>
  /** The payload of a token verified before and still within its `exp`, without a promise; else undefined. */
  known(token: string): JWTPayload | undefined
}

// Symmetric algorithms and `none` must never be paired with public keys: that is the HS/RS confusion.
const asymmetric = new Set([
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
])

/**
 * Builds the verifier. With both a secret and a JWKS, a token whose header says `HS*` is checked against
 * the secret only (HS256 only), every other token against the JWKS with its own allowlist; jose enforces
 * each allowlist, so `none` and a foreign algorithm always fail. Throws {@link ConfigError} for an
 * algorithm that cannot be used with a JWKS.
 */
export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const bad = options.jwksAlgorithms.filter((alg) => !asymmetric.has(alg))
  if (bad.length > 0) {
    throw new ConfigError(
      `invalid configuration: GATEWAY_JWT_ALGORITHMS: ${bad.join(', ')} not allowed (asymmetric algorithms only: ${[...asymmetric].join(', ')})`,
    )
  }
  const common: JWTVerifyOptions = {
    requiredClaims: ['exp', 'sub'],
    clockTolerance: options.clockToleranceS,
    ...(options.issuer === undefined ? {} : { issuer: options.issuer }),
    ...(options.audience === undefined ? {} : { audience: options.audience }),
  }
  // A KeyObject made once: given bytes, jose imports the key into WebCrypto again on every verification.
  const secretKey =
    options.secret === undefined ? undefined : createSecretKey(Buffer.from(options.secret, 'utf8'))
  const jwks = options.jwksUrl === undefined ? undefined : remoteKeys(options.jwksUrl, options.jwksTimeoutMs)
  const jwksAlgorithms = [...options.jwksAlgorithms]

  const verified = new VerifiedTokens({
    max: options.cacheSize ?? DEFAULT_CACHE_SIZE,
    clockToleranceS: options.clockToleranceS,
  })

  /** Verifies with jose; answers the payload and until when it may be kept (epoch ms). */
  const run = async (token: string): Promise<{ payload: JWTPayload; notAfter: number }> => {
    let alg: unknown
    try {
      alg = decodeProtectedHeader(token).alg
    } catch (cause) {
      throw new TokenRefused('malformed', 'token is not a well-formed JWT', { cause })
    }
    const symmetric = typeof alg === 'string' && alg.startsWith('HS')
    if (jwks && !(symmetric && secretKey)) {
      const { payload } = await jwtVerify(token, jwks, { ...common, algorithms: jwksAlgorithms })
      return { payload, notAfter: Date.now() + JWKS_REVERIFY_MS }
    }
    if (secretKey) {
      const { payload } = await jwtVerify(token, secretKey, { ...common, algorithms: ['HS256'] })
      return { payload, notAfter: Number.POSITIVE_INFINITY }
    }
    throw new TokenRefused('alg', 'token signing algorithm not accepted')
  }

  return {
    known: (token) => verified.get(token),
    async verify(token) {
      const known = verified.get(token)
      if (known !== undefined) return known
      let payload: JWTPayload
      let notAfter: number
      try {
        ;({ payload, notAfter } = await run(token))
      } catch (err) {
        throw classify(err)
      }
      if (typeof payload.sub !== 'string' || payload.sub.length === 0) {
        throw new TokenRefused('invalid_claim', 'token has an invalid "sub" claim')
      }
      // jose takes any number: `exp: 1e300` would be a credential that never ends, and a date nobody can print.
      if (typeof payload.exp !== 'number' || payload.exp > MAX_NUMERIC_DATE) {
        throw new TokenRefused('invalid_claim', 'token has an invalid "exp" claim')
      }
      verified.add(token, payload, notAfter)
      return payload
    },
  }
}

/**
 * jose's remote key set, with every failure to obtain keys (unreachable, non-200, bad JSON, timeout)
 * turned into `jwks_unavailable` so it is answered 503, not blamed on the token. A kid the set does not
 * hold stays a token problem.
 */
function remoteKeys(url: string, timeoutMs: number): JWTVerifyGetKey {
  const remote = createRemoteJWKSet(new URL(url), { timeoutDuration: timeoutMs })
  return async (header, token) => {
    try {
      return await remote(header, token)
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) throw err
      throw new TokenRefused('jwks_unavailable', 'cannot fetch the signing keys', { cause: err })
    }
  }
}

function classify(err: unknown): TokenRefused {
  if (err instanceof TokenRefused) return err
  const opts = { cause: err }
  if (err instanceof errors.JWTExpired) return new TokenRefused('expired', 'token expired', opts)
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') {
      return new TokenRefused('missing_claim', `token lacks the required "${err.claim}" claim`, opts)
    }
    if (err.claim === 'iss') return new TokenRefused('wrong_issuer', 'token issuer not accepted', opts)
    if (err.claim === 'aud') return new TokenRefused('wrong_audience', 'token audience not accepted', opts)
    if (err.claim === 'nbf') return new TokenRefused('not_yet_valid', 'token not valid yet', opts)
    return new TokenRefused('invalid_claim', `token has an invalid "${err.claim}" claim`, opts)
  }
  if (err instanceof errors.JOSEAlgNotAllowed) {
    return new TokenRefused('alg', 'token signing algorithm not accepted', opts)
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) {
    return new TokenRefused('bad_signature', 'token signature does not verify', opts)
  }
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
    return new TokenRefused('unknown_key', 'token signed by an unknown key', opts)
  }
  // JWSInvalid, JWTInvalid, JOSENotSupported, a key that does not fit the algorithm, ...
  return new TokenRefused('malformed', 'token is not a well-formed JWT', opts)
}
