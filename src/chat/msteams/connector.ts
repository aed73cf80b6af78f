import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { request } from 'undici'
import { serviceName, version } from '../../version.ts'
import type { OutboundActivity } from './activity.ts'
import { readBounded } from './bounded-body.ts'
import { allowedServiceBase } from './service-url.ts'
import { TeamsTokenError, type TeamsTokens } from './token.ts'

/** The Bot Framework connector as the Teams adapter uses it. */
export interface TeamsConnector {
  /** Posts `activity` in the conversation; its id (to update it later). */
  post(
    serviceUrl: string,
    conversationId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<{ id: string }>
  /** Replaces the activity `activityId` (a card updated for everyone). */
  update(
    serviceUrl: string,
    conversationId: string,
    activityId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<void>
  /** The 1:1 conversation of the bot with `userId` (an activity's `from.id`), created if it has none. */
  createPersonal(
    serviceUrl: string,
    tenantId: string,
    userId: string,
    options?: CallOptions,
  ): Promise<{ id: string }>
}

/** Per call: `retry: false` for calls a person waits for (an invoke's answer), which must not outlast it. */
export interface CallOptions {
  readonly retry?: boolean
}

/**
 * A connector call that failed for good. `code`: `service_url_refused` (not in GATEWAY_TEAMS_SERVICE_URLS: no
 * request was made), `token` (no token of our own), `unreachable`, `http_<status>`, `bad_response`.
 */
export class TeamsApiError extends Error {
  override readonly name = 'TeamsApiError'
  readonly code: string
  readonly status: number
  constructor(code: string, status: number, options?: ErrorOptions) {
    super(`Teams connector: ${code}`, options)
    this.code = code
    this.status = status
  }
}

export interface TeamsConnectorOptions {
  readonly appId: string
  readonly tokens: TeamsTokens
  /** GATEWAY_TEAMS_SERVICE_URLS. */
  readonly serviceUrls: readonly string[]
  readonly production: boolean
  /** One request gives up after this long (GATEWAY_NOTIFY_TIMEOUT_MS). */
  readonly timeoutMs: number
  /** The first backoff (GATEWAY_NOTIFY_RETRY_MS); doubled each time, with jitter. */
  readonly retryMs: number
  /** No retry starts later than this after the first try (GATEWAY_NOTIFY_RETRY_FOR_S). */
  readonly retryForMs: number
  readonly log: FastifyBaseLogger
}

/** The longest a Retry-After is waited; longer ones end the call (the outbox tries again later). */
const MAX_RETRY_AFTER_MS = 5 * 60_000
const MAX_BACKOFF_MS = 5 * 60_000
const MAX_RESPONSE_BYTES = 256 * 1024

/**
 * The connector REST API (v3) over undici, on an activity's `serviceUrl` once {@link allowedServiceBase} allows
 * it. Each call carries the bot's token; 429 (its Retry-After honoured), 5xx and network failures are retried
 * with exponential backoff within GATEWAY_NOTIFY_RETRY_FOR_S; a 401 drops the cached token and tries once more
 * with a fresh one. Redirects are never followed (a token would travel with them).
 */
export class TeamsConnectorClient implements TeamsConnector {
  readonly #o: TeamsConnectorOptions

  constructor(options: TeamsConnectorOptions) {
    this.#o = options
  }

  async post(
    serviceUrl: string,
    conversationId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<{ id: string }> {
    const path = `v3/conversations/${encodeURIComponent(conversationId)}/activities`
    const answer = await this.#call(serviceUrl, 'POST', path, activity, options)
    return { id: idOf(answer) }
  }

  async update(
    serviceUrl: string,
    conversationId: string,
    activityId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<void> {
    const path = `v3/conversations/${encodeURIComponent(conversationId)}/activities/${encodeURIComponent(activityId)}`
    await this.#call(serviceUrl, 'PUT', path, { ...activity, id: activityId }, options)
  }

  async createPersonal(
    serviceUrl: string,
    tenantId: string,
    userId: string,
    options?: CallOptions,
  ): Promise<{ id: string }> {
    const body = {
      bot: { id: `28:${this.#o.appId}` },
      members: [{ id: userId }],
      channelData: { tenant: { id: tenantId } },
      tenantId,
      isGroup: false,
    }
    const answer = await this.#call(serviceUrl, 'POST', 'v3/conversations', body, options)
    return { id: idOf(answer) }
  }

  async #call(
    serviceUrl: string,
    method: 'POST' | 'PUT',
    path: string,
    body: unknown,
    options: CallOptions | undefined,
  ): Promise<unknown> {
    const base = allowedServiceBase(serviceUrl, this.#o.serviceUrls, this.#o.production)
    if (base === null) throw new TeamsApiError('service_url_refused', 0)
    const url = new URL(path, base)
    // An id of `..` would climb out of the conversation: every call stays below the allowed base.
    if (!url.href.startsWith(base.href) || /(^|\/)\.\.?(\/|$)/.test(path))
      throw new TeamsApiError('bad_id', 0)
    const retry = options?.retry ?? true
    const started = Date.now()
    let renewed = false
    for (let attempt = 0; ; attempt++) {
      let token: string
      try {
        token = await this.#o.tokens.get()
      } catch (err) {
        const status = err instanceof TeamsTokenError ? err.status : 0
        const failure = new TeamsApiError('token', status, { cause: err })
        const wait =
          retry && (status === 0 || status === 429 || status >= 500) ? this.#backoff(attempt) : null
        if (wait === null || Date.now() + wait - started > this.#o.retryForMs) throw failure
        await sleep(wait)
        continue
      }
      const outcome = await this.#once(url, method, token, body)
      if (outcome.ok) return outcome.body
      if (outcome.status === 401 && !renewed) {
        // The token may have been revoked or rotated: once with a fresh one, then it is a refusal.
        this.#o.tokens.invalidate(token)
        renewed = true
        attempt--
        continue
      }
      const failure = new TeamsApiError(outcome.code, outcome.status)
      const transient = outcome.status === 0 || outcome.status === 429 || outcome.status >= 500
      if (!retry || !transient) throw failure
      const wait = outcome.retryAfterMs ?? this.#backoff(attempt)
      if (wait > MAX_RETRY_AFTER_MS || Date.now() + wait - started > this.#o.retryForMs) throw failure
      this.#o.log.debug(
        { host: url.host, status: outcome.status, waitMs: wait },
        'teams: connector call retried',
      )
      await sleep(wait)
    }
  }

  #backoff(attempt: number): number {
    const exp = Math.min(MAX_BACKOFF_MS, this.#o.retryMs * 2 ** attempt)
    return Math.round(exp / 2 + (Math.random() * exp) / 2)
  }

  async #once(
    url: URL,
    method: string,
    token: string,
    body: unknown,
  ): Promise<
    | { ok: true; body: unknown }
    | { ok: false; status: number; code: string; retryAfterMs: number | undefined }
  > {
    try {
      const res = await request(url, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json; charset=utf-8',
          accept: 'application/json',
          'user-agent': `${serviceName}/${version}`,
        },
        body: JSON.stringify(body),
        headersTimeout: this.#o.timeoutMs,
        bodyTimeout: this.#o.timeoutMs,
      })
      const text = await readBounded(res.body, MAX_RESPONSE_BYTES)
      if (res.statusCode >= 200 && res.statusCode < 300) {
        let parsed: unknown = {}
        try {
          parsed = text === '' ? {} : JSON.parse(text)
        } catch {
          return { ok: false, status: res.statusCode, code: 'bad_response', retryAfterMs: undefined }
        }
        return { ok: true, body: parsed }
      }
      return {
        ok: false,
        status: res.statusCode,
        code: `http_${res.statusCode}`,
        retryAfterMs: retryAfterMs(res.headers['retry-after']),
      }
    } catch (err) {
      this.#o.log.debug({ host: url.host, err: (err as Error).message }, 'teams: connector unreachable')
      return { ok: false, status: 0, code: 'unreachable', retryAfterMs: undefined }
    }
  }
}

/** A Retry-After header (seconds or an HTTP date) in milliseconds from now. */
export function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined || value.trim() === '') return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

function idOf(answer: unknown): string {
  const id = (answer as { id?: unknown } | null)?.id
  if (typeof id !== 'string' || id === '' || id.length > 512) throw new TeamsApiError('bad_response', 200)
  return id
}
