import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { z } from 'zod'
import { BadRequest, KasmBadAnswer, KasmLaunchTimeout } from '../errors.ts'
import type { SessionRegistry, SessionView } from '../sessions/types.ts'
import { teamSchema } from '../sessions/validate.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'
import type { KasmClient } from './client.ts'
import { type KasmIdForm, kasmIdKey, registryKasmId, sameKasmId } from './ids.ts'
import { registerFromKasm } from './registration.ts'
import type { LaunchPolicy } from './teams.ts'
import { needsDetails, type UpstreamRules, upstreamFor } from './upstream.ts'

/** What `POST /admin/sessions` asks for (validated by the route). */
export interface LaunchInput {
  /** Kasm's image id, or (resolved through `get_images`) an image's name or friendly name. */
  readonly imageId?: string
  readonly image?: string
  /** The Kasm user the caller asks for; the team's own when absent ({@link LaunchPolicy.userFor}). */
  readonly userId?: string
  readonly team: string
  /** Extra environment for the session's container. */
  readonly environment: Readonly<Record<string, string>>
}

/** A launched, registered session. */
export interface Launched {
  readonly session: SessionView
  /**
   * Kasm's viewer link for the session (it carries Kasm's own session token for the session's user), when Kasm
   * gave one on the viewer's origin for that session and that user.
   */
  readonly viewerUrl?: string
}

/** A Kasm id of an image or a user: hex, optionally dashed. */
const kasmRef = (what: string) =>
  z
    .string({ invalid_type_error: 'must be a string' })
    .regex(/^[A-Za-z0-9-]{1,64}$/, `must be a Kasm ${what} id (letters, digits, "-")`)

/** The body of `POST /admin/sessions`; unknown fields refused, exactly one of `image_id` and `image`. */
export const launchBodySchema = z
  .object({
    image_id: kasmRef('image').optional().describe('a Kasm image id'),
    image: z
      .string({ invalid_type_error: 'must be a string' })
      .min(1)
      .max(256)
      .optional()
      .describe('a Kasm image name'),
    user_id: kasmRef('user').optional().describe('the Kasm user (if the team allows choosing)'),
    team: teamSchema,
    environment: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'names must be environment variable names'),
        z
          .string({ invalid_type_error: 'values must be strings' })
          .max(4096, 'values must be at most 4096 characters'),
      )
      .refine((env) => Object.keys(env).length <= 64, 'at most 64 variables')
      .optional()
      .describe('at most 64 variables, given to the session'),
  })
  .strict()
  .refine((body) => (body.image_id === undefined) !== (body.image === undefined), {
    message: 'exactly one of image_id or image is required',
  })
  .describe('exactly one of `image_id` and `image`; unknown fields refused')

/** Options of {@link KasmLauncher}. */
export interface KasmLauncherOptions {
  readonly client: KasmClient
  readonly sessions: SessionRegistry
  /** The upstream URL policy every address from Kasm passes (GATEWAY_UPSTREAM_ALLOW). */
  readonly policy: UrlPolicy
  readonly rules: UpstreamRules
  /** Who a team's launches run as and what they may set (GATEWAY_KASM_TEAMS_FILE); the current one. */
  readonly launchPolicy: () => LaunchPolicy
  readonly idForm: KasmIdForm
  /** GATEWAY_KASM_SIDEBAR: the sidebar the viewer shows (KASM_RUNTIME_SIDEBAR; a request cannot set it). */
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
 * returned or logged. The session runs as the Kasm user the team's policy allows, and its environment holds
 * only what the policy allows, both checked before Kasm is asked anything. When the upstream rule needs the
 * session's address, the launch waits (bounded) for Kasm to report it; a session that cannot be registered,
 * or that Kasm started for another user than the one asked for, is destroyed again rather than left running
 * with a token nobody holds.
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
    const policy = this.#o.launchPolicy()
    const asked = policy.userFor(input.team, input.userId)
    policy.checkEnvironment(input.team, input.environment)
    const imageId = input.imageId ?? (await this.#resolveImage(input.image ?? ''))
    const token = randomBytes(32).toString('base64url')
    const environment: Record<string, string> = {
      ...(this.#o.sidebar === undefined ? {} : { KASM_RUNTIME_SIDEBAR: this.#o.sidebar }),
      ...input.environment,
      KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: 'true',
      KASM_RUNTIME_INBOX_TOKEN: token,
    }
    const requested = await client.requestKasm({ imageId, userId: asked, environment, scrub: [token] })
    // Kasm's session belongs to the user it names (the one destroy_kasm needs), whoever was asked for.
    const userId = requested.userId ?? asked
    const destroy = async (why: string): Promise<void> => {
      await client
        .destroyKasm({ kasmId: requested.kasmId, userId })
        .then(() => log.warn({ kasmId: requested.kasmId, why }, 'launched Kasm session destroyed again'))
        .catch((err: unknown) =>
          log.error({ err, kasmId: requested.kasmId, why }, 'launched Kasm session could not be destroyed'),
        )
    }

    if (kasmIdKey(userId) !== kasmIdKey(asked)) {
      await destroy('started for another user')
      throw new KasmBadAnswer('request_kasm', 'a session of another Kasm user than the one asked for')
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
        kasmUserId: asked,
      })
    } catch (err) {
      await destroy('not registered')
      throw err
    }
    log.info({ kasmId, team: input.team, imageId, kasmUserId: asked }, 'Kasm session launched and registered')
    const viewerUrl = this.#viewerUrl(requested.kasmUrl, requested.kasmId, asked)
    return { session, ...(viewerUrl === undefined ? {} : { viewerUrl }) }
  }

  /**
   * Kasm's viewer link, `/#/connect/kasm/<kasm_id>/<user_id>/<session_token>` [Kasm 1.7+], on the viewer's
   * origin; only when it is for this session and this user: the token in it lets whoever holds the link act
   * as that user.
   */
  #viewerUrl(kasmUrl: string | undefined, kasmId: string, userId: string): string | undefined {
    if (kasmUrl === undefined) return undefined
    const origin = new URL(this.#o.publicOrigin).origin
    const url = URL.canParse(kasmUrl, origin) ? new URL(kasmUrl, origin) : undefined
    const parts = /^#\/connect\/kasm\/([^/]+)\/([^/]+)\/[^/]+$/.exec(url?.hash ?? '')
    if (
      url?.origin === origin &&
      parts !== null &&
      sameKasmId(parts[1] ?? '', kasmId) &&
      kasmIdKey(parts[2] ?? '') === kasmIdKey(userId)
    )
      return url.href
    this.#o.log.warn(
      { kasmId },
      "Kasm's viewer link is not one for this session and its user on the viewer's origin; not returned",
    )
    return undefined
  }

  /**
   * The session's upstream; waits for Kasm to report what the rule needs, polling `get_kasm_status` with the
   * id as Kasm wrote it (`kasmOwnId`).
   */
  async #address(kasmId: string, kasmOwnId: string, userId: string): Promise<string> {
    const { client, rules } = this.#o
    if (!needsDetails(rules)) {
      const result = upstreamFor(rules, kasmId)
      if (!result.ok) throw new KasmBadAnswer('request_kasm', result.reason)
      return result.url
    }
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
