import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { RegistryUnreadable, StoreUnavailable } from '../errors.ts'
import type { SessionStore } from '../sessions/store.ts'
import { type TokenVault, TokenVaultError, type UnsealFailure } from '../sessions/token-vault.ts'
import type { Session, SessionSource, UnreadableSession } from '../sessions/types.ts'
import type { ChangeFeed } from './change-feed.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'

/** A session as stored in Redis: everything public, the token only as a JWE. */
interface StoredSession {
  kasmId: string
  upstream: string
  team: string
  source: SessionSource
  version: number
  /** Launched sessions: the Kasm user it runs as. */
  kasmUserId?: string
  /** Compact JWE (`dir`/`A256GCM`) of the messaging token, bound to kasmId, naming its key (`kid`). */
  token: string
}

/** What the mirror keeps of a readable record besides the session: its stored form, for compare-and-set. */
interface Sealed {
  readonly raw: string
  /** Sealed with the first key of GATEWAY_ENCRYPTION_KEY (false: an older key, or a 0.1.0 record). */
  readonly current: boolean
}

/** An unreadable record, with its stored form so that deleting it never deletes a record written since. */
interface Unreadable extends UnreadableSession {
  readonly raw: string
}

/** What {@link RedisSessionStore.reseal} did with one record. */
export type ResealResult = 'resealed' | 'current' | 'changed' | 'fenced'

/** Options of {@link RedisSessionStore}. */
export interface RedisSessionStoreOptions {
  readonly command: RedisClient & ClusterCommands
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
 *
 * Every change of the mirror runs in one queue, one at a time, in the order it was asked for: a whole read
 * (the first load, a resync), the re-read of sessions another replica announced, this replica's own writes
 * and re-seals. Each reads or writes Redis when its turn comes, so nothing older than what the mirror holds
 * is ever applied over it: a load whose hash was read before a re-seal wrote cannot put the old record back
 * after the re-seal's announcement was applied, and an announcement that arrives while a load runs (the
 * first one included) is re-read once the load is done, never dropped.
 */
export class RedisSessionStore implements SessionStore {
  readonly #o: RedisSessionStoreOptions
  readonly #mirror = new Map<string, Session>()
  readonly #listeners = new Set<(kasmId: string) => void>()
  /** The stored form of each readable record, and whether it is on the sealing key. */
  readonly #sealed = new Map<string, Sealed>()
  /** Records that cannot be opened (wrong key, tampering): readiness names the count, the admin API lists them. */
  readonly #unreadable = new Map<string, Unreadable>()
  #loaded: Promise<void> | undefined
  #isLoaded = false
  /** The mirror's one queue of changes (see the class comment). */
  #queue: Promise<unknown> = Promise.resolve()
  /** Sessions announced by other replicas and not re-read yet. */
  readonly #announced = new Set<string>()
  /** Whether a re-read of {@link #announced} is queued and has not started yet. */
  #rereadQueued = false
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

  peek(kasmId: string): Session | undefined {
    return this.#isLoaded ? this.#mirror.get(kasmId) : undefined
  }

  async list(): Promise<Session[]> {
    await this.#loadedOrFail()
    return [...this.#mirror.values()]
  }

  put(session: Session): Promise<void> {
    return this.#inTurn(async () => {
      this.assertWritable()
      const { command, keys } = this.#o
      const raw = JSON.stringify(await this.#seal(session))
      try {
        await command
          .multi()
          .hset(keys.sessions, session.kasmId, raw)
          .publish(keys.sessionsChannel, this.#announce(session.kasmId))
          .exec()
      } catch (err) {
        throw new StoreUnavailable('the session registry cannot be written', { cause: err })
      }
      this.#unreadable.delete(session.kasmId)
      this.#sealed.set(session.kasmId, { raw, current: true })
      this.#mirror.set(session.kasmId, session)
      this.#notify(session.kasmId)
    })
  }

  remove(kasmId: string): Promise<boolean> {
    return this.#inTurn(async () => {
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
      const had = this.#forget(kasmId)
      if (removed > 0 || had) this.#notify(kasmId)
      return removed > 0
    })
  }

  async unreadable(): Promise<UnreadableSession[]> {
    return [...this.#unreadable.values()]
      .map(({ kasmId, team, reason }) => ({ kasmId, team, reason }))
      .sort((a, b) => (a.kasmId < b.kasmId ? -1 : a.kasmId > b.kasmId ? 1 : 0))
  }

  dropUnreadable(kasmId: string): Promise<boolean> {
    return this.#inTurn(async () => {
      const record = this.#unreadable.get(kasmId)
      if (record === undefined) return false
      const { command, keys } = this.#o
      let result: number
      try {
        result = await command.krgCasRecord(
          keys.sessions,
          keys.sessions,
          '',
          kasmId,
          record.raw,
          '',
          keys.sessionsChannel,
          this.#announce(kasmId),
        )
      } catch (err) {
        throw new StoreUnavailable('the session registry cannot be written', { cause: err })
      }
      if (result !== 1) return false
      this.#unreadable.delete(kasmId)
      return true
    })
  }

  assertWritable(): void {
    if (this.#unreadable.size === 0) return
    const reasons = new Map<string, number>()
    for (const { reason } of this.#unreadable.values()) reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
    const counts = [...reasons].map(([reason, n]) => `${reason}: ${n}`).join(', ')
    const records = this.#unreadable.size === 1 ? 'record' : 'records'
    throw new RegistryUnreadable(`${this.#unreadable.size} stored session ${records} (${counts})`)
  }

  /** Sessions whose record is sealed with an older key (or by 0.1.0, with none named): the re-seal's work. */
  onOldKey(): string[] {
    return [...this.#sealed].filter(([, sealed]) => !sealed.current).map(([kasmId]) => kasmId)
  }

  /** How many records cannot be opened (metrics). */
  get unreadableCount(): number {
    return this.#unreadable.size
  }

  /**
   * Seals one record again with the sealing key, compare-and-set against the record as read (a write made
   * since wins) and fenced by the caller's job lease (a holder that lost it writes nothing).
   */
  reseal(kasmId: string, lease: { key: string; fence: number }): Promise<ResealResult> {
    return this.#inTurn(async () => {
      const sealed = this.#sealed.get(kasmId)
      const session = this.#mirror.get(kasmId)
      if (sealed === undefined || session === undefined || sealed.current) return 'current'
      const raw = JSON.stringify(await this.#seal(session))
      const { command, keys } = this.#o
      const result = await command.krgCasRecord(
        keys.sessions,
        lease.key,
        String(lease.fence),
        kasmId,
        sealed.raw,
        raw,
        keys.sessionsChannel,
        this.#announce(kasmId),
      )
      if (result === -1) return 'fenced'
      // Written meanwhile: its announcement re-reads it.
      if (result === 0) return 'changed'
      this.#sealed.set(kasmId, { raw, current: true })
      return 'resealed'
    })
  }

  subscribe(listener: (kasmId: string) => void): () => void {
    this.#listeners.add(listener)
    return () => void this.#listeners.delete(listener)
  }

  async ready(): Promise<void> {
    if (!this.#isLoaded) throw new Error('sessions not loaded from redis')
    if (this.#unreadable.size > 0) {
      throw new Error(
        `${this.#unreadable.size} stored session token(s) cannot be decrypted (wrong GATEWAY_ENCRYPTION_KEY?); ` +
          'GET /admin/unreadable-sessions lists them',
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

  /** Runs `change` after every change asked for before it (see the class comment). */
  #inTurn<T>(change: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(change, change)
    this.#queue = run.catch(() => {})
    return run
  }

  async #loadedOrFail(): Promise<void> {
    if (this.#isLoaded) return
    this.#loaded ??= this.#inTurn(() => this.#reload()).finally(() => {
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
      await this.#inTurn(async () => {
        await this.#restoreIfLost()
        await this.#reload()
      })
    } catch (err) {
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn']({ err }, 'sessions not read from redis; retrying')
      this.#scheduleResync()
    }
  }

  #scheduleResync(): void {
    if (this.#closed || this.#retry !== undefined) return
    this.#retry = setTimeout(() => void this.#resync(), 1000)
    this.#retry.unref()
  }

  /** The stored form of a session: its token sealed (JWE) so a Redis dump holds no token. */
  async #seal(session: Session): Promise<StoredSession> {
    return {
      kasmId: session.kasmId,
      upstream: session.upstream,
      team: session.team,
      source: session.source,
      version: session.version,
      ...(session.kasmUserId === undefined ? {} : { kasmUserId: session.kasmUserId }),
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

  /**
   * Re-reads the whole hash and tells listeners about every session that differs from the mirror; then the
   * sessions announced while it ran, so that a store reports itself loaded only with every change announced
   * until then applied. Runs in turn.
   */
  async #reload(): Promise<void> {
    const all = await this.#o.command.hgetall(this.#o.keys.sessions)
    const seen = new Set<string>()
    const changed: string[] = []
    for (const [kasmId, json] of Object.entries(all)) {
      seen.add(kasmId)
      if (await this.#apply(kasmId, json)) changed.push(kasmId)
    }
    for (const kasmId of [...this.#mirror.keys(), ...this.#unreadable.keys()]) {
      if (!seen.has(kasmId) && this.#forget(kasmId)) changed.push(kasmId)
    }
    // Announced while the hash was read and applied (a re-seal, another replica's write): read again, never
    // dropped. What is announced from now on is re-read by the turn its announcement queued.
    changed.push(...(await this.#reread()))
    this.#isLoaded = true
    for (const kasmId of new Set(changed)) this.#notify(kasmId)
  }

  /** An announcement of another replica's change: the session is re-read in turn (batched). */
  #onMessage(payload: string): void {
    const space = payload.indexOf(' ')
    if (payload.slice(0, space) === this.#o.replicaId || this.#closed) return
    this.#announced.add(payload.slice(space + 1))
    if (this.#rereadQueued) return
    this.#rereadQueued = true
    void this.#inTurn(async () => {
      this.#rereadQueued = false
      if (this.#closed) return
      try {
        for (const kasmId of await this.#reread()) this.#notify(kasmId)
      } catch (err) {
        // The mirror keeps the last known sessions; a whole re-read a second from now catches up.
        this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
          { err },
          'session change not read from redis; reading the registry again',
        )
        this.#scheduleResync()
      }
    })
  }

  /**
   * Re-reads the sessions announced so far (one HMGET) and applies them; returns those that changed for the
   * caller to notify. Runs in turn.
   */
  async #reread(): Promise<string[]> {
    const ids = [...this.#announced]
    if (ids.length === 0) return []
    // Taken before the read: one announced again while it runs is read again by the next turn.
    this.#announced.clear()
    let records: (string | null)[]
    try {
      records = await this.#o.command.hmget(this.#o.keys.sessions, ...ids)
    } catch (err) {
      for (const kasmId of ids) this.#announced.add(kasmId)
      throw err
    }
    const changed: string[] = []
    for (const [i, kasmId] of ids.entries()) {
      const json = records[i] ?? null
      if (json === null ? this.#forget(kasmId) : await this.#apply(kasmId, json)) changed.push(kasmId)
    }
    return changed
  }

  /** Drops a session from the mirror and every side table; true when the mirror had it. */
  #forget(kasmId: string): boolean {
    this.#sealed.delete(kasmId)
    this.#unreadable.delete(kasmId)
    return this.#mirror.delete(kasmId)
  }

  /** Puts a stored record into the mirror; true when that changed anything a reader cares about. */
  async #apply(kasmId: string, json: string): Promise<boolean> {
    let session: Session
    let current: boolean
    let stored: StoredSession | undefined
    try {
      stored = JSON.parse(json) as StoredSession
      if (typeof stored?.token !== 'string') throw new TokenVaultError('record without a token', 'malformed')
      const opened = await this.#o.vault.unseal(kasmId, stored.token)
      current = opened.current
      session = {
        kasmId,
        upstream: stored.upstream,
        team: stored.team,
        source: stored.source,
        version: stored.version,
        messagingToken: opened.secret,
        ...(typeof stored.kasmUserId === 'string' ? { kasmUserId: stored.kasmUserId } : {}),
      }
    } catch (err) {
      const reason: UnsealFailure = err instanceof TokenVaultError ? err.reason : 'malformed'
      const team = typeof stored?.team === 'string' ? stored.team : null
      const known = this.#unreadable.get(kasmId)
      if (known?.raw !== json) {
        // Reasons and ids only: the error's cause never carries the record, and the record never reaches a log.
        const detail = err instanceof TokenVaultError ? err.message : 'not a session record'
        this.#o.log.error(
          { kasmId, team, reason, detail },
          'stored session unreadable; ignored until fixed or deleted',
        )
      }
      this.#sealed.delete(kasmId)
      this.#unreadable.set(kasmId, { kasmId, team, reason, raw: json })
      return this.#mirror.delete(kasmId)
    }
    this.#unreadable.delete(kasmId)
    this.#sealed.set(kasmId, { raw: json, current })
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
