import { KasmBadAnswer, KasmRefused, KasmUnreachable } from '../errors.ts'
import type { Secret } from '../sessions/secret.ts'

/**
 * A client of Kasm Workspaces' Developer API: the five calls the gateway makes, each a JSON POST. What the
 * docs show, release by release (the fake in test/fixtures/kasm-api.ts cites each example):
 *
 * - Base: `https://<kasm>/api/public/<call>` in every release documented from 1.7; GATEWAY_KASM_API_URL is
 *   that base (an origin alone means `/api/public/`).
 * - Authentication (GATEWAY_KASM_API_AUTH): `body` sends `api_key` and `api_key_secret` as JSON fields
 *   (documented 1.7 to 1.18); `basic` sends `Authorization: Basic base64(key:secret)` (the current
 *   reference, docs.kasm.com "Developer API").
 * - Errors: a JSON `error_message`, with a 4xx/5xx status or, observed live, with 200; both are refusals.
 * - Ids: dashed or plain depending on the call (see ids.ts); the answers here keep Kasm's string.
 */

/** The calls the gateway makes. */
export type KasmCall = 'request_kasm' | 'get_kasm_status' | 'get_kasms' | 'get_images' | 'destroy_kasm'

/** How a call ended, for metrics. */
export type KasmCallOutcome = 'ok' | 'refused' | 'unreachable' | 'bad_answer'

/** Options of {@link KasmClient}. */
export interface KasmClientOptions {
  /** GATEWAY_KASM_API_URL. */
  readonly url: string
  readonly key: Secret
  readonly secret: Secret
  readonly auth: 'body' | 'basic'
  readonly timeoutMs: number
  /** Sent as User-Agent, so Kasm's logs tell the replicas apart. */
  readonly userAgent: string
  readonly onCall?: (call: KasmCall, outcome: KasmCallOutcome) => void
}

/** One Kasm session as the gateway reads it from `get_kasms` or `get_kasm_status`: strings only. */
export interface KasmSession {
  readonly kasmId: string
  readonly userId?: string
  readonly operationalStatus?: string
  readonly containerIp?: string
  readonly hostname?: string
  readonly host?: string
  readonly zoneName?: string
}

/** What `request_kasm` answered. */
export interface RequestedKasm {
  readonly kasmId: string
  readonly userId?: string
  /** The viewer path (`/#/connect/kasm/<kasm_id>/<user_id>/<session_token>`), relative to Kasm's address. */
  readonly kasmUrl?: string
}

/** What `get_kasm_status` answered: `kasm` is present once Kasm has the session's details (running). */
export interface KasmStatus {
  readonly operationalStatus: string | undefined
  readonly kasm: KasmSession | undefined
}

/** One image of `get_images`. */
export interface KasmImage {
  readonly imageId: string
  readonly name?: string
  readonly friendlyName?: string
}

type Json = Record<string, unknown>

/** The Developer API base: the configured URL ending with `/`; an origin alone means `/api/public/`. */
export function apiBase(url: string): string {
  const base = new URL(url)
  if (base.pathname === '/') base.pathname = '/api/public/'
  if (!base.pathname.endsWith('/')) base.pathname += '/'
  return base.href
}

export class KasmClient {
  readonly #o: KasmClientOptions
  readonly #base: string

  constructor(options: KasmClientOptions) {
    this.#o = options
    this.#base = apiBase(options.url)
  }

  /** The origin of Kasm's API (the default viewer origin). */
  get origin(): string {
    return new URL(this.#base).origin
  }

  /** Creates a session; `environment` goes into its container. `scrub` lists values never to echo in errors. */
  async requestKasm(input: {
    imageId: string
    userId?: string
    environment: Record<string, string>
    scrub: readonly string[]
  }): Promise<RequestedKasm> {
    const body: Json = { image_id: input.imageId, environment: input.environment }
    if (input.userId !== undefined) body.user_id = input.userId
    const answer = await this.#call('request_kasm', body, input.scrub)
    // Some releases answer flat, some nest the session under `kasm`.
    const flat = (isObject(answer.kasm) ? answer.kasm : answer) as Json
    const kasmId = text(flat.kasm_id) ?? text(answer.kasm_id)
    if (kasmId === undefined) throw this.#bad('request_kasm', 'no kasm_id')
    const userId = text(flat.user_id) ?? text(answer.user_id)
    const kasmUrl = text(answer.kasm_url) ?? text(flat.kasm_url)
    return { kasmId, ...(userId ? { userId } : {}), ...(kasmUrl ? { kasmUrl } : {}) }
  }

  async getKasmStatus(input: { kasmId: string; userId: string }): Promise<KasmStatus> {
    const answer = await this.#call('get_kasm_status', { kasm_id: input.kasmId, user_id: input.userId })
    const kasm = isObject(answer.kasm) ? session(answer.kasm) : undefined
    return {
      operationalStatus: text(answer.operational_status) ?? kasm?.operationalStatus,
      kasm,
    }
  }

  /** Every live session Kasm has. Throws rather than ever answering "none" for an answer it cannot read. */
  async getKasms(): Promise<KasmSession[]> {
    const answer = await this.#call('get_kasms', {})
    if (!Array.isArray(answer.kasms)) throw this.#bad('get_kasms', 'no kasms list')
    const out: KasmSession[] = []
    for (const item of answer.kasms) {
      const parsed = isObject(item) ? session(item) : undefined
      // One entry without an id would make its session look destroyed: the whole answer is unusable.
      if (parsed === undefined) throw this.#bad('get_kasms', 'an entry without kasm_id')
      out.push(parsed)
    }
    return out
  }

  async getImages(): Promise<KasmImage[]> {
    const answer = await this.#call('get_images', {})
    if (!Array.isArray(answer.images)) throw this.#bad('get_images', 'no images list')
    const out: KasmImage[] = []
    for (const item of answer.images) {
      if (!isObject(item)) continue
      const imageId = text(item.image_id)
      if (imageId === undefined) continue
      const name = text(item.name)
      const friendlyName = text(item.friendly_name)
      out.push({ imageId, ...(name ? { name } : {}), ...(friendlyName ? { friendlyName } : {}) })
    }
    return out
  }

  async destroyKasm(input: { kasmId: string; userId: string }): Promise<void> {
    await this.#call('destroy_kasm', { kasm_id: input.kasmId, user_id: input.userId })
  }

  async #call(call: KasmCall, body: Json, scrub: readonly string[] = []): Promise<Json> {
    const { key, secret, auth, timeoutMs, userAgent } = this.#o
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': userAgent,
    }
    const payload: Json = { ...body }
    if (auth === 'basic') {
      headers.authorization = `Basic ${Buffer.from(`${key.reveal()}:${secret.reveal()}`).toString('base64')}`
    } else {
      payload.api_key = key.reveal()
      payload.api_key_secret = secret.reveal()
    }
    let response: Response
    try {
      response = await fetch(new URL(call, this.#base), {
        method: 'POST',
        headers,
        body: JSON.stringify(payload),
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      this.#o.onCall?.(call, 'unreachable')
      const cause = err as { name?: string; cause?: { code?: string } }
      throw new KasmUnreachable(
        cause.name === 'TimeoutError' ? 'timed out' : (cause.cause?.code ?? 'network error'),
        {
          cause: err,
        },
      )
    }
    const raw = await response.text().catch(() => '')
    let answer: unknown
    try {
      answer = JSON.parse(raw)
    } catch {
      answer = undefined
    }
    if (!isObject(answer)) {
      // A proxy's HTML error page in front of a Kasm that is down is an outage, not an answer.
      const outage = response.status >= 500
      this.#o.onCall?.(call, outage ? 'unreachable' : 'bad_answer')
      if (outage) throw new KasmUnreachable(`${call} answered ${response.status}`)
      throw this.#bad(call, `status ${response.status}, not a JSON object`)
    }
    const message = text(answer.error_message)
    if (message !== undefined || !response.ok) {
      this.#o.onCall?.(call, 'refused')
      const shown = clean(message ?? `status ${response.status}`, [...scrub, key.reveal(), secret.reveal()])
      throw new KasmRefused(call, `${shown} (${response.status})`)
    }
    this.#o.onCall?.(call, 'ok')
    return answer
  }

  #bad(call: KasmCall, what: string): Error {
    this.#o.onCall?.(call, 'bad_answer')
    return new KasmBadAnswer(call, what)
  }
}

function session(item: Json): KasmSession | undefined {
  const kasmId = text(item.kasm_id)
  if (kasmId === undefined) return undefined
  const out: Record<string, string> = { kasmId }
  for (const [field, name] of [
    ['user_id', 'userId'],
    ['operational_status', 'operationalStatus'],
    ['container_ip', 'containerIp'],
    ['hostname', 'hostname'],
    ['host', 'host'],
    ['zone_name', 'zoneName'],
  ] as const) {
    const value = text(item[field])
    if (value !== undefined) out[name] = value
  }
  return out as unknown as KasmSession
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** Kasm's words, shortened, printable, and without anything secret the request carried. */
function clean(message: string, secrets: readonly string[]): string {
  let out = message
  for (const secret of secrets) if (secret.length >= 4) out = out.replaceAll(secret, '[secret]')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return out.replace(/[\u0000-\u001f\u007f]+/g, ' ').slice(0, 300)
}
