import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { StoreUnavailable } from '../errors.ts'
import type { SessionStore } from '../sessions/store.ts'
import type { TokenVault } from '../sessions/token-vault.ts'
import type { Session, SessionSource } from '../sessions/types.ts'
import type { ChangeFeed } from './change-feed.ts'
import type { ClusterKeys } from './keys.ts'

/** A session as stored in Redis: everything public, the token only as a JWE. */
interface StoredSession {
  kasmId: string
  upstream: string
  team: string
  source: SessionSource
  version: number
  /** Compact JWE (`dir`/`A256GCM`) of the messaging token, bound to kasmId. */
  token: string
}

/** Options of {@link RedisSessionStore}. */
export interface RedisSessionStoreOptions {
  readonly command: Redis
  readonly feed: ChangeFeed
  readonly keys: ClusterKeys
  readonly vault: TokenVault
  readonly replicaId: string
  readonly log: FastifyBaseLogger
  readonly onListenerError?: (err: unknown) => void
  /** True while Redis is known to be away (logged once elsewhere): retries are then logged at debug. */
  readonly quiet?: () => boolean
}

/**
 * The cluster's {@link SessionStore}: one Redis hash (kasmId -> JSON, token encrypted by the
 * {@link TokenVault}), mirrored in memory on every replica. Reads come from the mirror, so requests cost no
 * Redis round trip and keep reaching their runtime while Redis is down; writes go to Redis first (503 when
 * it is unreachable) and are announced on a pub/sub channel, on which every other replica re-reads that one
 * session and tells its listeners. After a reconnect the whole hash is re-read, so a missed message costs
 * nothing.
 */
export class RedisSessionStore implements SessionStore {
  readonly #o: RedisSessionStoreOptions
  readonly #mirror = new Map<string, Session>()
  readonly #listeners = new Set<(kasmId: string) => void>()
  /** kasmIds whose record cannot be decrypted (wrong key, tampering): readiness names the count. */
  readonly #unreadable = new Set<string>()
  #loaded: Promise<void> | undefined
  #isLoaded = false
  #unlisten: (() => void) | undefined
  #closed = false
  #retry: NodeJS.Timeout | undefined

  constructor(options: RedisSessionStoreOptions) {
    this.#o = options
  }

  /** Subscribes to changes and loads the hash; a Redis outage at boot leaves it not ready until it is back. */
  async start(): Promise<void> {
    this.#unlisten = await this.#o.feed.listen(this.#o.keys.sessionsChannel, {
      message: (payload) => void this.#onMessage(payload),
      resync: () => void this.#resync(),
    })
    await this.#resync()
  }

  async get(kasmId: string): Promise<Session | undefined> {
    await this.#loadedOrFail()
    return this.#mirror.get(kasmId)
  }

  async list(): Promise<Session[]> {
    await this.#loadedOrFail()
    return [...this.#mirror.values()]
  }

  async put(session: Session): Promise<void> {
    const { command, keys } = this.#o
    const stored = await this.#seal(session)
    try {
      await command
        .multi()
        .hset(keys.sessions, session.kasmId, JSON.stringify(stored))
        .publish(keys.sessionsChannel, this.#announce(session.kasmId))
        .exec()
    } catch (err) {
      throw new StoreUnavailable('the session registry cannot be written', { cause: err })
    }
    this.#unreadable.delete(session.kasmId)
    this.#mirror.set(session.kasmId, session)
    this.#notify(session.kasmId)
  }

  async remove(kasmId: string): Promise<boolean> {
    const { command, keys } = this.#o
    let removed: number
    try {
      const results = await command
        .multi()
        .hdel(keys.sessions, kasmId)
        .publish(keys.sessionsChannel, this.#announce(kasmId))
        .exec()
      removed = Number(results?.[0]?.[1] ?? 0)
    } catch (err) {
      throw new StoreUnavailable('the session registry cannot be written', { cause: err })
    }
    const had = this.#mirror.delete(kasmId)
    this.#unreadable.delete(kasmId)
    if (removed > 0 || had) this.#notify(kasmId)
    return removed > 0
  }

  subscribe(listener: (kasmId: string) => void): () => void {
    this.#listeners.add(listener)
    return () => void this.#listeners.delete(listener)
  }

  async ready(): Promise<void> {
    if (!this.#isLoaded) throw new Error('sessions not loaded from redis')
    if (this.#unreadable.size > 0) {
      throw new Error(
        `${this.#unreadable.size} stored session token(s) cannot be decrypted (wrong GATEWAY_ENCRYPTION_KEY?)`,
      )
    }
  }

  async close(): Promise<void> {
    this.#closed = true
    if (this.#retry) clearTimeout(this.#retry)
    this.#unlisten?.()
    this.#listeners.clear()
  }

  /** Channel payload: `<replica> <kasmId>`, so a replica skips its own announcements. */
  #announce(kasmId: string): string {
    return `${this.#o.replicaId} ${kasmId}`
  }

  async #loadedOrFail(): Promise<void> {
    if (this.#isLoaded) return
    this.#loaded ??= this.#reload().finally(() => {
      this.#loaded = undefined
    })
    try {
      await this.#loaded
    } catch (err) {
      throw new StoreUnavailable('the session registry cannot be read', { cause: err })
    }
  }

  /**
   * After a (re)connect: if Redis lost its data (restart without persistence: the epoch key is gone), writes
   * the mirror back first, so a Redis restart does not unregister every session; then re-reads the hash.
   * Retried every second until it succeeds.
   */
  async #resync(): Promise<void> {
    if (this.#retry) clearTimeout(this.#retry)
    this.#retry = undefined
    if (this.#closed) return
    try {
      await this.#restoreIfLost()
      await this.#reload()
    } catch (err) {
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn']({ err }, 'sessions not read from redis; retrying')
      this.#retry = setTimeout(() => void this.#resync(), 1000)
      this.#retry.unref()
    }
  }

  /** The stored form of a session: its token sealed (JWE) so a Redis dump holds no token. */
  async #seal(session: Session): Promise<StoredSession> {
    return {
      kasmId: session.kasmId,
      upstream: session.upstream,
      team: session.team,
      source: session.source,
      version: session.version,
      token: await this.#o.vault.seal(session.kasmId, session.messagingToken),
    }
  }

  async #restoreIfLost(): Promise<void> {
    const { command, keys, log } = this.#o
    if ((await command.exists(keys.sessionsEpoch)) === 1) return
    const restore = command.multi()
    // HSETNX: a session another replica wrote (or restored) meanwhile is never overwritten.
    for (const session of this.#mirror.values()) {
      restore.hsetnx(keys.sessions, session.kasmId, JSON.stringify(await this.#seal(session)))
    }
    restore.set(keys.sessionsEpoch, randomUUID(), 'NX')
    const results = await restore.exec()
    const err = results?.find(([e]) => e)?.[0]
    if (err) throw err
    if (this.#isLoaded && this.#mirror.size > 0) {
      log.warn(
        { sessions: this.#mirror.size },
        'redis had lost the session registry; restored it from memory',
      )
    }
  }

  /** Re-reads the whole hash and tells listeners about every session that differs from the mirror. */
  async #reload(): Promise<void> {
    const all = await this.#o.command.hgetall(this.#o.keys.sessions)
    const seen = new Set<string>()
    const changed: string[] = []
    for (const [kasmId, json] of Object.entries(all)) {
      seen.add(kasmId)
      if (await this.#apply(kasmId, json)) changed.push(kasmId)
    }
    for (const kasmId of [...this.#mirror.keys()]) {
      if (!seen.has(kasmId) && this.#mirror.delete(kasmId)) changed.push(kasmId)
    }
    for (const kasmId of this.#unreadable) if (!seen.has(kasmId)) this.#unreadable.delete(kasmId)
    this.#isLoaded = true
    for (const kasmId of changed) this.#notify(kasmId)
  }

  async #onMessage(payload: string): Promise<void> {
    const space = payload.indexOf(' ')
    const kasmId = payload.slice(space + 1)
    if (payload.slice(0, space) === this.#o.replicaId || this.#closed || !this.#isLoaded) return
    try {
      const json = await this.#o.command.hget(this.#o.keys.sessions, kasmId)
      let changed: boolean
      if (json === null) {
        this.#unreadable.delete(kasmId)
        changed = this.#mirror.delete(kasmId)
      } else {
        changed = await this.#apply(kasmId, json)
      }
      if (changed) this.#notify(kasmId)
    } catch (err) {
      // The next reconnect (or message) re-reads it; meanwhile the mirror keeps the last known session.
      this.#o.log.warn({ err, kasmId }, 'session change not read from redis')
    }
  }

  /** Puts a stored record into the mirror; true when that changed anything a reader cares about. */
  async #apply(kasmId: string, json: string): Promise<boolean> {
    let session: Session
    try {
      const stored = JSON.parse(json) as StoredSession
      session = {
        kasmId,
        upstream: stored.upstream,
        team: stored.team,
        source: stored.source,
        version: stored.version,
        messagingToken: await this.#o.vault.open(kasmId, stored.token),
      }
    } catch (err) {
      if (!this.#unreadable.has(kasmId))
        this.#o.log.error({ err, kasmId }, 'stored session unreadable; ignored')
      this.#unreadable.add(kasmId)
      return this.#mirror.delete(kasmId)
    }
    this.#unreadable.delete(kasmId)
    const old = this.#mirror.get(kasmId)
    this.#mirror.set(kasmId, session)
    return (
      old === undefined ||
      old.version !== session.version ||
      old.upstream !== session.upstream ||
      old.team !== session.team ||
      old.source !== session.source ||
      !old.messagingToken.equals(session.messagingToken)
    )
  }

  #notify(kasmId: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(kasmId)
      } catch (err) {
        this.#o.onListenerError?.(err)
      }
    }
  }
}
