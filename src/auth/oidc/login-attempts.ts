import * as oidc from 'openid-client'
import type { LinkRequest } from '../../identity/link-tokens.ts'
import { Secret } from '../../sessions/secret.ts'
import { hashSessionId as hash } from '../cookie-sessions.ts'
import type { Sealer } from '../sealer.ts'

/** A sign-in a browser started: what its callback must match, and where to go afterwards. */
export interface LoginAttempt {
  /** SHA-256 of the browser's binding cookie (login CSRF: a callback from another browser is refused). */
  readonly bindingHash: string
  readonly nonce: string
  readonly codeVerifier: string
  /** A same-origin path, already checked. */
  readonly returnTo: string
  /** A sign-in to link this chat account (`auth/slack-link`): no cookie session, the link is confirmed next. */
  readonly chatLink?: LinkRequest
}

/** Where attempts wait for their callback: one-time entries with a TTL. */
export interface LoginAttemptStore {
  put(key: string, value: string, ttlMs: number): Promise<void>
  /** The value, removed in the same step (so a callback can be used once), or null. */
  take(key: string): Promise<string | null>
  /** The value, left in place, or null (what a page shows of an entry another step will take). */
  peek(key: string): Promise<string | null>
  close(): Promise<void>
}

/** How long a person has between leaving for the IdP and coming back. */
export const LOGIN_ATTEMPT_TTL_MS = 10 * 60_000
const statePattern = /^[A-Za-z0-9_-]{22,128}$/

/** Login attempts keyed by the hash of their `state`, sealed at rest (the PKCE verifier is in there). */
export class LoginAttempts {
  private readonly store: LoginAttemptStore
  private readonly sealer: Sealer
  private readonly ttlMs: number

  constructor(store: LoginAttemptStore, sealer: Sealer, ttlMs = LOGIN_ATTEMPT_TTL_MS) {
    this.store = store
    this.sealer = sealer
    this.ttlMs = ttlMs
  }

  /** Stores the attempt and returns its fresh `state`. */
  async start(attempt: LoginAttempt): Promise<string> {
    const state = oidc.randomState()
    const key = hash(state)
    await this.store.put(
      key,
      await this.sealer.seal(`login:${key}`, new Secret(JSON.stringify(attempt))),
      this.ttlMs,
    )
    return state
  }

  /** The attempt of `state`, once; null when unknown, used or expired (or `state` is not one of ours). */
  async finish(state: string): Promise<LoginAttempt | null> {
    if (!statePattern.test(state)) return null
    const key = hash(state)
    const sealed = await this.store.take(key)
    if (sealed === null) return null
    return JSON.parse((await this.sealer.open(`login:${key}`, sealed)).reveal()) as LoginAttempt
  }
}

/** {@link LoginAttemptStore} of one replica. */
export class MemoryLoginAttemptStore implements LoginAttemptStore {
  readonly #entries = new Map<string, { value: string; expiresAt: number }>()
  readonly #sweeper = setInterval(() => this.#sweep(), 60_000)

  constructor() {
    this.#sweeper.unref()
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    this.#entries.set(key, { value, expiresAt: Date.now() + ttlMs })
  }

  async take(key: string): Promise<string | null> {
    const entry = this.#entries.get(key)
    this.#entries.delete(key)
    return entry !== undefined && entry.expiresAt > Date.now() ? entry.value : null
  }

  async peek(key: string): Promise<string | null> {
    const entry = this.#entries.get(key)
    return entry !== undefined && entry.expiresAt > Date.now() ? entry.value : null
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    this.#entries.clear()
  }

  #sweep(): void {
    const now = Date.now()
    for (const [key, e] of this.#entries) if (e.expiresAt <= now) this.#entries.delete(key)
  }
}
