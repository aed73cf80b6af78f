import { request } from 'undici'
import { readBounded } from './bounded-body.ts'

/** A token is renewed this long before it expires, so that none expires on its way to the connector. */
const RENEW_BEFORE_MS = 5 * 60_000
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024

export interface TeamsTokenOptions {
  /** GATEWAY_TEAMS_LOGIN_URL, without a trailing `/`. */
  readonly loginUrl: string
  readonly tenantId: string
  readonly appId: string
  readonly password: string
  /** The scope, `<issuer>/.default` (`https://api.botframework.com/.default` in the public cloud). */
  readonly scope: () => Promise<string>
  readonly timeoutMs: number
}

/** The token endpoint refused or failed; `status` is its HTTP status (0: unreachable). */
export class TeamsTokenError extends Error {
  override readonly name = 'TeamsTokenError'
  readonly status: number
  constructor(message: string, status: number, options?: ErrorOptions) {
    super(message, options)
    this.status = status
  }
}

/**
 * The bot's own bearer token for the connector: a client-credentials grant at
 * `<login>/<tenant>/oauth2/v2.0/token`, kept until shortly before it expires, one request in flight however
 * many callers wait. The password is sent in the form body, never a URL, and never logged.
 */
export class TeamsTokens {
  readonly #options: TeamsTokenOptions
  #cached: { token: string; until: number } | null = null
  #inFlight: Promise<string> | null = null

  constructor(options: TeamsTokenOptions) {
    this.#options = options
  }

  /** A valid token (cached, or fetched now). Throws {@link TeamsTokenError}. */
  async get(): Promise<string> {
    const cached = this.#cached
    if (cached !== null && Date.now() < cached.until) return cached.token
    this.#inFlight ??= this.#fetch().finally(() => {
      this.#inFlight = null
    })
    return this.#inFlight
  }

  /** Forgets `token` (the connector answered 401 to it): the next {@link get} fetches another. */
  invalidate(token: string): void {
    if (this.#cached?.token === token) this.#cached = null
  }

  async #fetch(): Promise<string> {
    const o = this.#options
    const url = `${o.loginUrl}/${encodeURIComponent(o.tenantId)}/oauth2/v2.0/token`
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: o.appId,
      client_secret: o.password,
      scope: await o.scope(),
    }).toString()
    let status = 0
    let text: string
    try {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body,
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
      })
      status = res.statusCode
      text = await readBounded(res.body, MAX_TOKEN_RESPONSE_BYTES)
    } catch (err) {
      throw new TeamsTokenError('the token endpoint is unreachable', status, { cause: err })
    }
    let parsed: { access_token?: unknown; expires_in?: unknown; error?: unknown } = {}
    try {
      parsed = JSON.parse(text)
    } catch {}
    if (status !== 200 || typeof parsed.access_token !== 'string' || parsed.access_token === '') {
      // Entra's error code (`invalid_client`, `unauthorized_client`, …) says what to fix; never its description.
      const code =
        typeof parsed.error === 'string' && /^[a-z_]{1,64}$/.test(parsed.error) ? parsed.error : 'no token'
      throw new TeamsTokenError(`the token endpoint refused: ${code}`, status)
    }
    const lifetimeS = Number(parsed.expires_in)
    const lifetimeMs = Number.isFinite(lifetimeS) && lifetimeS > 0 ? lifetimeS * 1000 : 3600_000
    // Short-lived tokens (tests) are kept for half their life rather than not at all.
    const keepMs = lifetimeMs > 2 * RENEW_BEFORE_MS ? lifetimeMs - RENEW_BEFORE_MS : lifetimeMs / 2
    this.#cached = { token: parsed.access_token, until: Date.now() + keepMs }
    return parsed.access_token
  }
}
