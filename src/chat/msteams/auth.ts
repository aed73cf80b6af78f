import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from 'jose'
import { activityTenants, type TeamsActivity } from './activity.ts'
import type { BotFrameworkOpenId } from './openid.ts'

/** Why an inbound request was refused (logs and tests; the caller only ever sees 401). */
export type TeamsAuthRefusal =
  /** No `Authorization: Bearer …`. */
  | 'missing'
  /** Not a JWS, no `kid`, an algorithm we do not take. */
  | 'malformed'
  /** Signed by no key of the JWKS (after a re-read, cooldown permitting), or the signature is wrong. */
  | 'signature'
  | 'issuer'
  | 'audience'
  | 'expired'
  /** `nbf`/`iat` in the future, beyond the skew. */
  | 'not_yet_valid'
  /** The key that signed it is not endorsed for `msteams`. */
  | 'endorsement'
  /** The token's `serviceurl` claim is not the activity's `serviceUrl`. */
  | 'service_url'
  /** The activity is from another tenant than GATEWAY_TEAMS_TENANT_ID, or names none. */
  | 'tenant'
  /** The activity is from another channel than Teams. */
  | 'channel'

/** The keys could not be read: nothing can be verified (the caller answers 503, never acts). */
export class TeamsKeysUnavailable extends Error {
  override readonly name = 'TeamsKeysUnavailable'
}

/** A checked token's claims. */
export type TeamsBearerResult = { ok: true; claims: JWTPayload } | { ok: false; reason: TeamsAuthRefusal }

/** Microsoft's SDKs allow five minutes either way; a token lives an hour, so this stays small against it. */
export const CLOCK_SKEW_S = 300
const ALGORITHMS = ['RS256', 'RS384', 'RS512']
/** Bearer tokens are well under this; a longer header is refused before any parsing. */
const MAX_TOKEN_CHARS = 16 * 1024

export interface TeamsBearerCheckOptions {
  /** GATEWAY_TEAMS_APP_ID: the audience. */
  readonly appId: string
  /** GATEWAY_TEAMS_TENANT_ID: the only tenant whose activities are taken. */
  readonly tenantId: string
  readonly openId: BotFrameworkOpenId
  readonly timeoutMs: number
  /** How soon after a read the JWKS may be read again for an unknown `kid` (default 5 minutes). */
  readonly cooldownMs?: number
}

/**
 * Checks the bearer token of an inbound activity as the Bot Framework defines it: RS256 by a key of the JWKS the
 * OpenID metadata names (a `kid` not there re-reads the JWKS, at most once per cooldown), the metadata's issuer,
 * audience the app id, not expired (small skew), the key endorsed for `msteams`; then, against the activity,
 * the token's `serviceurl` claim equal to its `serviceUrl`, and its tenant ours.
 */
export class TeamsBearerCheck {
  readonly #options: TeamsBearerCheckOptions
  #keys: { uri: string; set: ReturnType<typeof createRemoteJWKSet> } | null = null

  constructor(options: TeamsBearerCheckOptions) {
    this.#options = options
  }

  /**
   * The token of `authorization` checked on its own (signature, issuer, audience, lifetime, endorsement).
   * Throws {@link TeamsKeysUnavailable} when the metadata or keys cannot be read.
   */
  async verify(authorization: string | undefined): Promise<TeamsBearerResult> {
    const match = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(authorization ?? '')
    if (match?.[1] === undefined) return { ok: false, reason: 'missing' }
    const token = match[1]
    if (token.length > MAX_TOKEN_CHARS) return { ok: false, reason: 'malformed' }
    let metadata: Awaited<ReturnType<BotFrameworkOpenId['get']>>
    try {
      metadata = await this.#options.openId.get()
    } catch (err) {
      throw new TeamsKeysUnavailable('Bot Framework OpenID metadata unavailable', { cause: err })
    }
    const keys = this.#keySet(metadata.jwksUri)
    let kid: string | undefined
    let claims: JWTPayload
    try {
      const verified = await jwtVerify(token, keys, {
        issuer: metadata.issuer,
        audience: this.#options.appId,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_SKEW_S,
        requiredClaims: ['exp'],
      })
      kid = verified.protectedHeader.kid
      claims = verified.payload
    } catch (err) {
      return { ok: false, reason: refusalOf(err) }
    }
    // The key that verified it, as the JWKS lists it: its `endorsements` name the channels it may speak for.
    const jwk = keys.jwks()?.keys.find((k) => k.kid === kid) as { endorsements?: unknown } | undefined
    const endorsements = jwk?.endorsements
    if (kid === undefined || !Array.isArray(endorsements) || !endorsements.includes('msteams'))
      return { ok: false, reason: 'endorsement' }
    return { ok: true, claims }
  }

  /** The activity matches the token that carried it: same `serviceUrl`, Teams, our tenant. */
  matches(claims: JWTPayload, activity: TeamsActivity): TeamsAuthRefusal | undefined {
    if (typeof claims.serviceurl !== 'string' || claims.serviceurl !== activity.serviceUrl)
      return 'service_url'
    if (activity.channelId !== undefined && activity.channelId !== 'msteams') return 'channel'
    const tenants = activityTenants(activity)
    if (tenants.length === 0 || tenants.some((t) => t.toLowerCase() !== this.#options.tenantId.toLowerCase()))
      return 'tenant'
    return undefined
  }

  #keySet(uri: string): ReturnType<typeof createRemoteJWKSet> {
    if (this.#keys?.uri !== uri)
      this.#keys = {
        uri,
        set: createRemoteJWKSet(new URL(uri), {
          timeoutDuration: this.#options.timeoutMs,
          cooldownDuration: this.#options.cooldownMs ?? 5 * 60_000,
          cacheMaxAge: 24 * 3600_000,
        }),
      }
    return this.#keys.set
  }
}

/** What a jose failure means for the caller; a key fetch that failed is not the sender's fault. */
function refusalOf(err: unknown): TeamsAuthRefusal {
  if (err instanceof errors.JWTExpired) return 'expired'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return 'audience'
    if (err.claim === 'iss') return 'issuer'
    if (err.claim === 'nbf' || err.claim === 'iat') return 'not_yet_valid'
    return 'malformed'
  }
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSNoMatchingKey)
    return 'signature'
  if (err instanceof errors.JWKSTimeout || (err instanceof Error && !(err instanceof errors.JOSEError)))
    throw new TeamsKeysUnavailable('Bot Framework signing keys unavailable', { cause: err })
  return 'malformed'
}
