import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { z } from 'zod'
import { BadRequest, KasmBadAnswer, KasmLaunchTimeout } from '../errors.ts'
import type { SessionRegistry, SessionView } from '../sessions/types.ts'
import { teamSchema } from '../sessions/validate.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'
import type { KasmClient } from './client.ts'
import { type KasmIdForm, registryKasmId } from './ids.ts'
import { registerFromKasm } from './registration.ts'
import { needsDetails, type UpstreamRules, upstreamFor } from './upstream.ts'

/** What `POST /admin/sessions` asks for (validated by the route). */
export interface LaunchInput {
  /** Kasm's image id, or (resolved through `get_images`) an image's name or friendly name. */
  readonly imageId?: string
  readonly image?: string
  /** The Kasm user the session runs as; Kasm makes an anonymous user when absent. */
  readonly userId?: string
  readonly team: string
  /** Extra environment for the session's container. */
  readonly environment: Readonly<Record<string, string>>
}

/** A launched, registered session. */
export interface Launched {
  readonly session: SessionView
  /** Kasm's viewer link for the session (carries Kasm's own session token for that user), if Kasm gave one. */
  readonly viewerUrl?: string
}

/**
 * Environment variables the gateway sets itself: the messaging token, and the observe routes closed to
 * anyone without a token (the runtime is reached directly, not behind Kasm's session cookie, and the
 * gateway sends the token on reads too). A launch request may not set these.
 */
export const RESERVED_ENVIRONMENT: ReadonlySet<string> = new Set([
  'KASM_RUNTIME_INBOX_TOKEN',
  'KASM_RUNTIME_SESSION_TOKEN',
  'KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED',
])

/** A Kasm id of an image or a user: hex, optionally dashed. */
const kasmRef = (what: string) =>
  z
    .string({ invalid_type_error: 'must be a string' })
    .regex(/^[A-Za-z0-9-]{1,64}$/, `must be a Kasm ${what} id (letters, digits, "-")`)

/** The body of `POST /admin/sessions`; unknown fields refused, exactly one of `image_id` and `image`. */
export const launchBodySchema = z
  .object({
    image_id: kasmRef('image').optional(),
    image: z.string({ invalid_type_error: 'must be a string' }).min(1).max(256).optional(),
    user_id: kasmRef('user').optional(),
    team: teamSchema,
    environment: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'names must be environment variable names'),
        z
          .string({ invalid_type_error: 'values must be strings' })
          .max(4096, 'values must be at most 4096 characters'),
      )
      .refine((env) => Object.keys(env).length <= 64, 'at most 64 variables')
      .refine(
        (env) => Object.keys(env).every((name) => !RESERVED_ENVIRONMENT.has(name)),
        `${[...RESERVED_ENVIRONMENT].join(', ')} are set by the gateway`,
      )
      .optional(),
  })
  .strict()
  .refine((body) => (body.image_id === undefined) !== (body.image === undefined), {
    message: 'exactly one of image_id or image is required',
  })

/** Options of {@link KasmLauncher}. */
export interface KasmLauncherOptions {
  readonly client: KasmClient
  readonly sessions: SessionRegistry
  /** The upstream URL policy every address from Kasm passes (GATEWAY_UPSTREAM_ALLOW). */
  readonly policy: UrlPolicy
  readonly rules: UpstreamRules
  readonly idForm: KasmIdForm
  /** GATEWAY_KASM_SIDEBAR: the sidebar the viewer shows (KASM_RUNTIME_SIDEBAR), unless the request sets one. */
  readonly sidebar: string | undefined
  /** Where viewer links point (GATEWAY_KASM_PUBLIC_URL, default the API's origin). */
  readonly publicOrigin: string
  /** GATEWAY_KASM_LAUNCH_TIMEOUT_S: how long to wait for the session's address, in ms. */
  readonly addressTimeoutMs: number
  readonly log: FastifyBaseLogger
  readonly onLaunch?: (result: 'launched' | 'failed' | 'timeout') => void
}

/**
 * Launches Kasm sessions with a messaging token only the gateway knows: 32 random bytes, put into the
 * session's environment by `request_kasm` and into the registry (sealed at rest in cluster mode), never
 * returned or logged. When the upstream rule needs the session's address, the launch waits (bounded) for
 * Kasm to report it; a session that cannot be registered is destroyed again rather than left running with
 * a token nobody holds.
 */
export class KasmLauncher {
  readonly #o: KasmLauncherOptions

  constructor(options: KasmLauncherOptions) {
    this.#o = options
  }

  async launch(input: LaunchInput): Promise<Launched> {
    try {
      const launched = await this.#launch(input)
      this.#o.onLaunch?.('launched')
      return launched
    } catch (err) {
      this.#o.onLaunch?.(err instanceof KasmLaunchTimeout ? 'timeout' : 'failed')
      throw err
    }
  }

  async #launch(input: LaunchInput): Promise<Launched> {
    const { client, idForm, log } = this.#o
    const imageId = input.imageId ?? (await this.#resolveImage(input.image ?? ''))
    const token = randomBytes(32).toString('base64url')
    const environment: Record<string, string> = {
      ...(this.#o.sidebar === undefined ? {} : { KASM_RUNTIME_SIDEBAR: this.#o.sidebar }),
      ...input.environment,
      KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: 'true',
      KASM_RUNTIME_INBOX_TOKEN: token,
    }
    const requested = await client.requestKasm({
      imageId,
      ...(input.userId === undefined ? {} : { userId: input.userId }),
      environment,
      scrub: [token],
    })
    const userId = requested.userId ?? input.userId
    const destroy = async (why: string): Promise<void> => {
      if (userId === undefined) {
        log.error(
          { kasmId: requested.kasmId, why },
          'launched Kasm session left running: Kasm gave no user id',
        )
        return
      }
      await client
        .destroyKasm({ kasmId: requested.kasmId, userId })
        .then(() => log.warn({ kasmId: requested.kasmId, why }, 'launched Kasm session destroyed again'))
        .catch((err: unknown) =>
          log.error({ err, kasmId: requested.kasmId, why }, 'launched Kasm session could not be destroyed'),
        )
    }

    const kasmId = registryKasmId(requested.kasmId, idForm)
    if (kasmId === null) {
      await destroy('kasm_id unusable')
      throw new KasmBadAnswer('request_kasm', 'a kasm_id that is not a valid session id')
    }
    let upstream: string
    try {
      upstream = await this.#address(kasmId, requested.kasmId, userId)
    } catch (err) {
      await destroy(err instanceof Error ? err.message : 'no address')
      throw err
    }
    let session: SessionView
    try {
      session = await registerFromKasm(this.#o.sessions, this.#o.policy, {
        kind: 'launch',
        kasmId,
        upstream,
        team: input.team,
        messagingToken: token,
      })
    } catch (err) {
      await destroy('not registered')
      throw err
    }
    log.info({ kasmId, team: input.team, imageId }, 'Kasm session launched and registered')
    const viewerUrl =
      requested.kasmUrl === undefined ? undefined : new URL(requested.kasmUrl, this.#o.publicOrigin).href
    return { session, ...(viewerUrl === undefined ? {} : { viewerUrl }) }
  }

  /**
   * The session's upstream; waits for Kasm to report what the rule needs, polling `get_kasm_status` with the
   * id as Kasm wrote it (`kasmOwnId`).
   */
  async #address(kasmId: string, kasmOwnId: string, userId: string | undefined): Promise<string> {
    const { client, rules } = this.#o
    if (!needsDetails(rules)) {
      const result = upstreamFor(rules, kasmId)
      if (!result.ok) throw new KasmBadAnswer('request_kasm', result.reason)
      return result.url
    }
    if (userId === undefined) throw new KasmBadAnswer('request_kasm', 'no user_id to ask the status with')
    const deadline = Date.now() + this.#o.addressTimeoutMs
    let waitMs = 250
    for (;;) {
      const status = await client.getKasmStatus({ kasmId: kasmOwnId, userId })
      const result = upstreamFor(rules, kasmId, status.kasm)
      if (result.ok) return result.url
      if (!result.pending) throw new KasmBadAnswer('get_kasm_status', result.reason)
      if (Date.now() + waitMs > deadline) throw new KasmLaunchTimeout(String(this.#o.addressTimeoutMs / 1000))
      await new Promise((resolve) => setTimeout(resolve, waitMs))
      waitMs = Math.min(waitMs * 2, 2000)
    }
  }

  async #resolveImage(image: string): Promise<string> {
    const images = await this.#o.client.getImages()
    const matches = images.filter((i) => i.name === image || i.friendlyName === image)
    const shown = JSON.stringify(image.slice(0, 128))
    if (matches.length === 0) throw new BadRequest(`image: Kasm has no image named ${shown}`)
    if (matches.length > 1)
      throw new BadRequest(`image: ${matches.length} Kasm images are named ${shown}; send image_id instead`)
    return (matches[0] as { imageId: string }).imageId
  }
}
