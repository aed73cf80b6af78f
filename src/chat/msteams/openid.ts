import { request } from 'undici'

/** The Bot Framework issuer of the public cloud, when the metadata does not name one. */
export const BOT_FRAMEWORK_ISSUER = 'https://api.botframework.com'

/** What the gateway reads of the Bot Framework's OpenID metadata. */
export interface BotFrameworkMetadata {
  /** Who signs inbound tokens (`https://api.botframework.com`; `.us` in the US government clouds). */
  readonly issuer: string
  /** Where its signing keys are, each with the channels it is endorsed for. */
  readonly jwksUri: string
}

/** Metadata is kept this long before it is read again (Microsoft changes it rarely; keys rotate under it). */
const METADATA_TTL_MS = 24 * 3600_000
/** After a failed read, the next request waits this long before another is tried. */
const FAILURE_COOLDOWN_MS = 10_000
const MAX_METADATA_BYTES = 64 * 1024

/**
 * The OpenID metadata at GATEWAY_TEAMS_OPENID_URL, read when first needed and kept a day; one read in flight.
 * It names the issuer (also the outbound token's scope) and the JWKS. Plain http is allowed only outside
 * production (config checks the URL; this checks the JWKS it names).
 */
export class BotFrameworkOpenId {
  readonly #url: string
  readonly #timeoutMs: number
  readonly #production: boolean
  #cached: { value: BotFrameworkMetadata; until: number } | null = null
  #inFlight: Promise<BotFrameworkMetadata> | null = null
  #failedAt = 0

  constructor(options: { url: string; timeoutMs: number; production: boolean }) {
    this.#url = options.url
    this.#timeoutMs = options.timeoutMs
    this.#production = options.production
  }

  /** The metadata; throws when it cannot be read (nothing may be verified without it). */
  async get(): Promise<BotFrameworkMetadata> {
    const cached = this.#cached
    if (cached !== null && Date.now() < cached.until) return cached.value
    // A stale copy serves while the cooldown after a failure lasts: keys rotate under the same JWKS URL.
    if (Date.now() - this.#failedAt < FAILURE_COOLDOWN_MS) {
      if (cached !== null) return cached.value
      throw new Error('Bot Framework OpenID metadata unavailable (cooling down)')
    }
    this.#inFlight ??= this.#read().finally(() => {
      this.#inFlight = null
    })
    try {
      return await this.#inFlight
    } catch (err) {
      if (cached !== null) return cached.value
      throw err
    }
  }

  async #read(): Promise<BotFrameworkMetadata> {
    try {
      const res = await request(this.#url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      })
      const text = await res.body.text()
      if (res.statusCode !== 200) throw new Error(`Bot Framework OpenID metadata: HTTP ${res.statusCode}`)
      if (text.length > MAX_METADATA_BYTES) throw new Error('Bot Framework OpenID metadata: too large')
      const doc = JSON.parse(text) as { issuer?: unknown; jwks_uri?: unknown }
      const jwksUri = typeof doc.jwks_uri === 'string' ? new URL(doc.jwks_uri).href : ''
      if (!/^https?:\/\//.test(jwksUri) || (this.#production && !jwksUri.startsWith('https:')))
        throw new Error('Bot Framework OpenID metadata: jwks_uri must be an https URL')
      const issuer = typeof doc.issuer === 'string' && doc.issuer !== '' ? doc.issuer : BOT_FRAMEWORK_ISSUER
      const value = { issuer, jwksUri }
      this.#cached = { value, until: Date.now() + METADATA_TTL_MS }
      return value
    } catch (err) {
      this.#failedAt = Date.now()
      throw err
    }
  }
}
