import * as oidc from 'openid-client'
import { isLoopbackUrl } from '../../config.ts'
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
 * `<login>/<tenant>/oauth2/v2.0/token` made by openid-client, kept until shortly before it expires, one request
 * in flight however many callers wait. The password is sent in the form body, never a URL, and never logged.
 */
export class TeamsTokens {
  readonly #options: TeamsTokenOptions
  #cached: { token: string; until: number } | null = null
  #inFlight: Promise<string> | null = null
  #config: oidc.Configuration | null = null

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
    const scope = await o.scope()
    let answer: { access_token: string; expires_in?: number | undefined }
    try {
      answer = await oidc.clientCredentialsGrant(this.#configuration(), { scope })
    } catch (err) {
      throw refusal(err)
    }
    if (typeof answer.access_token !== 'string' || answer.access_token === '')
      throw new TeamsTokenError('the token endpoint refused: no token', 200)
    const lifetimeS = Number(answer.expires_in)
    const lifetimeMs = Number.isFinite(lifetimeS) && lifetimeS > 0 ? lifetimeS * 1000 : 3600_000
    // Short-lived tokens (tests) are kept for half their life rather than not at all.
    const keepMs = lifetimeMs > 2 * RENEW_BEFORE_MS ? lifetimeMs - RENEW_BEFORE_MS : lifetimeMs / 2
    this.#cached = { token: answer.access_token, until: Date.now() + keepMs }
    return answer.access_token
  }

  /**
   * Entra as an authorization server, from its metadata (no discovery: the token endpoint is all a client
   * credentials grant needs, and GATEWAY_TEAMS_LOGIN_URL names it). The password goes in the form body
   * (client_secret_post, as Microsoft documents for bots).
   */
  #configuration(): oidc.Configuration {
    if (this.#config !== null) return this.#config
    const o = this.#options
    const tenantBase = `${o.loginUrl}/${encodeURIComponent(o.tenantId)}`
    const config = new oidc.Configuration(
      { issuer: `${tenantBase}/v2.0`, token_endpoint: `${tenantBase}/oauth2/v2.0/token` },
      o.appId,
      undefined,
      oidc.ClientSecretPost(o.password),
    )
    config.timeout = Math.max(1, Math.ceil(o.timeoutMs / 1000))
    config[oidc.customFetch] = boundedFetch
    // Plain http only to this machine (the tests' stand-in); config.ts requires https in production.
    if (o.loginUrl.startsWith('http:') && isLoopbackUrl(o.loginUrl)) oidc.allowInsecureRequests(config)
    this.#config = config
    return config
  }
}

/**
 * fetch with the answer read up to {@link MAX_TOKEN_RESPONSE_BYTES} (openid-client reads whatever it is given).
 * openid-client asks for `redirect: manual`: a redirect is an answer, never followed with the password.
 */
async function boundedFetch(url: string, init: oidc.CustomFetchOptions): Promise<Response> {
  const res = await fetch(url, init as RequestInit)
  const text = res.body === null ? '' : await readBounded(res.body, MAX_TOKEN_RESPONSE_BYTES)
  return new Response(text === '' && res.status === 204 ? null : text, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  })
}

/** openid-client's failure as a {@link TeamsTokenError}: Entra's error code (never its description) and status. */
function refusal(err: unknown): TeamsTokenError {
  if (err instanceof oidc.ResponseBodyError) {
    // Entra's error code (`invalid_client`, `unauthorized_client`, …) says what to fix.
    const code = /^[a-z_]{1,64}$/.test(err.error) ? err.error : 'no token'
    return new TeamsTokenError(`the token endpoint refused: ${code}`, err.status, { cause: err })
  }
  if (err instanceof oidc.WWWAuthenticateChallengeError)
    return new TeamsTokenError('the token endpoint refused: a challenge', err.status, { cause: err })
  const status = (err as { cause?: { status?: unknown } } | undefined)?.cause?.status
  if (err instanceof oidc.ClientError && typeof status === 'number')
    return new TeamsTokenError(`the token endpoint refused: ${status}`, status, { cause: err })
  return new TeamsTokenError('the token endpoint is unreachable', 0, { cause: err })
}
