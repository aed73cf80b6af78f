import { setTimeout as sleep } from 'node:timers/promises'
import {
  type Account,
  type ActivityParams,
  ConversationClient,
  type CreateConversationParams,
} from '@microsoft/teams.api'
import type { FastifyBaseLogger } from 'fastify'
import { serviceName, version } from '../../version.ts'
import type { OutboundActivity } from './activity.ts'
import { TeamsApiError } from './api-error.ts'
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
/** An activity is at most 100 KB for Teams (cards included); ours stay far below. */
const MAX_REQUEST_BYTES = 256 * 1024

/** The options Microsoft's HTTP client (`@microsoft/teams.common`'s `Client`, over axios) takes. */
type HttpOptions = Exclude<
  NonNullable<ConstructorParameters<typeof ConversationClient>[1]>,
  { request: unknown }
>
type HttpMiddleware = NonNullable<HttpOptions['middlewares']>[number]

/** A call's outcome: the connector's answer, or why not and whether trying again may help. */
type Outcome =
  | { ok: true; body: unknown }
  | { ok: false; status: number; code: string; transient: boolean; retryAfterMs: number | undefined }

/**
 * The connector REST API (v3) through Microsoft's Teams SDK (`@microsoft/teams.api`'s `ConversationClient`), on
 * an activity's `serviceUrl` once {@link allowedServiceBase} allows it. Around the SDK: each call carries the
 * bot's token; 429 (its Retry-After honoured), 5xx and network failures are retried with exponential backoff
 * within GATEWAY_NOTIFY_RETRY_FOR_S; a 401 drops the cached token and tries once more with a fresh one.
 * Redirects are never followed (a token would travel with them), answers are bounded, proxies from the
 * environment are not used (the token goes to the allowed host only).
 */
export class TeamsConnectorClient implements TeamsConnector {
  readonly #o: TeamsConnectorOptions
  readonly #limits: HttpMiddleware

  constructor(options: TeamsConnectorOptions) {
    this.#o = options
    // The SDK's Client passes a request's config through to axios: the transport's limits go in there.
    this.#limits = {
      invoke: (context, next) => {
        Object.assign(context.config, {
          maxRedirects: 0,
          maxContentLength: MAX_RESPONSE_BYTES,
          maxBodyLength: MAX_REQUEST_BYTES,
          proxy: false,
          timeout: options.timeoutMs,
          // A 2xx answer that is no JSON is an error, not a string handed on as the activity.
          transitional: { silentJSONParsing: false },
        })
        return next()
      },
    }
  }

  async post(
    serviceUrl: string,
    conversationId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<{ id: string }> {
    const answer = await this.#call(serviceUrl, [conversationId], options, (c) =>
      c.createActivity(encodeURIComponent(conversationId), activity as ActivityParams),
    )
    return { id: idOf(answer) }
  }

  async update(
    serviceUrl: string,
    conversationId: string,
    activityId: string,
    activity: OutboundActivity,
    options?: CallOptions,
  ): Promise<void> {
    await this.#call(serviceUrl, [conversationId, activityId], options, (c) =>
      c.updateActivity(encodeURIComponent(conversationId), encodeURIComponent(activityId), {
        ...activity,
        id: activityId,
      } as ActivityParams),
    )
  }

  async createPersonal(
    serviceUrl: string,
    tenantId: string,
    userId: string,
    options?: CallOptions,
  ): Promise<{ id: string }> {
    const params: CreateConversationParams = {
      bot: { id: `28:${this.#o.appId}` },
      members: [{ id: userId } as Account],
      channelData: { tenant: { id: tenantId } },
      tenantId,
      isGroup: false,
    }
    const answer = await this.#call(serviceUrl, [], options, (c) => c.create(params))
    return { id: idOf(answer) }
  }

  async #call(
    serviceUrl: string,
    ids: readonly string[],
    options: CallOptions | undefined,
    send: (client: ConversationClient) => Promise<unknown>,
  ): Promise<unknown> {
    const base = allowedServiceBase(serviceUrl, this.#o.serviceUrls, this.#o.production)
    if (base === null) throw new TeamsApiError('service_url_refused', 0)
    // The SDK puts ids in the path as given: encoded here, and an id of `.`/`..` (which would climb out of the
    // conversation once resolved) or an empty one is refused before any request.
    if (ids.some((id) => id === '' || id === '.' || id === '..' || id.length > 1024))
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
      const outcome = await this.#once(base, token, send)
      if (outcome.ok) return outcome.body
      if (outcome.status === 401 && !renewed) {
        // The token may have been revoked or rotated: once with a fresh one, then it is a refusal.
        this.#o.tokens.invalidate(token)
        renewed = true
        attempt--
        continue
      }
      const failure = new TeamsApiError(outcome.code, outcome.status)
      if (!retry || !outcome.transient) throw failure
      const wait = outcome.retryAfterMs ?? this.#backoff(attempt)
      if (wait > MAX_RETRY_AFTER_MS || Date.now() + wait - started > this.#o.retryForMs) throw failure
      this.#o.log.debug(
        { host: base.host, status: outcome.status, waitMs: wait },
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
    base: URL,
    token: string,
    send: (client: ConversationClient) => Promise<unknown>,
  ): Promise<Outcome> {
    // One SDK client per attempt: it carries this attempt's token (a 401 renews it) and our limits.
    const client = new ConversationClient(base.href, {
      token,
      timeout: this.#o.timeoutMs,
      headers: { 'user-agent': `${serviceName}/${version}` },
      logger: sdkLogger(this.#o.log),
      middlewares: [this.#limits],
    })
    try {
      return { ok: true, body: await send(client) }
    } catch (err) {
      const failure = failureOf(err)
      if (failure.status === 0)
        this.#o.log.debug({ host: base.host, code: failure.code }, 'teams: connector unreachable')
      return failure
    }
  }
}

/**
 * What an SDK call's error says. The SDK lets axios's errors through: an HTTP answer outside 2xx (a 3xx too:
 * redirects are not followed) has `response.status` and `response.headers`; a 2xx one that is no JSON, or an
 * answer over the size bound, is `ERR_BAD_RESPONSE`; anything else never got an answer.
 */
function failureOf(err: unknown): Extract<Outcome, { ok: false }> {
  const e = err as { response?: { status?: unknown; headers?: Record<string, unknown> }; code?: unknown }
  const status = typeof e?.response?.status === 'number' ? e.response.status : undefined
  if (status !== undefined && status >= 200 && status < 300)
    return { ok: false, status, code: 'bad_response', transient: false, retryAfterMs: undefined }
  if (status !== undefined) {
    const header = e.response?.headers?.['retry-after']
    return {
      ok: false,
      status,
      code: `http_${status}`,
      transient: status === 429 || status >= 500,
      retryAfterMs: retryAfterMs(typeof header === 'string' ? header : undefined),
    }
  }
  // Too large: the connector answered (a post may have been made), so asking again would not help.
  if (e?.code === 'ERR_BAD_RESPONSE')
    return { ok: false, status: 0, code: 'bad_response', transient: false, retryAfterMs: undefined }
  return { ok: false, status: 0, code: 'unreachable', transient: true, retryAfterMs: undefined }
}

/** The SDK's log lines go to ours at debug (its default logger writes to the console). */
function sdkLogger(log: FastifyBaseLogger): NonNullable<HttpOptions['logger']> {
  const write = (...msg: unknown[]) => log.debug({ sdk: 'teams.api' }, msg.map(String).join(' '))
  const logger: NonNullable<HttpOptions['logger']> = {
    debug: write,
    info: write,
    warn: write,
    error: write,
    trace: write,
    log: (_level, ...msg) => write(...msg),
    child: () => logger,
  }
  return logger
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
