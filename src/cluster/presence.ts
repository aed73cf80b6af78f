import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { ClusterKeys } from './keys.ts'

/** One open viewer stream as presence sees it (the events folder's ViewerStream has this shape). */
export interface WatchingViewer {
  readonly kasmId: string
  readonly operator: { readonly sub: string; readonly name?: string }
}

/** Where presence reads this replica's open viewer streams from (bound once the events plugin exists). */
export type ViewerSource = () => Iterable<WatchingViewer>

/** Who watches a session, over every replica. */
export interface PresenceView {
  kasmId: string
  /** Open event streams. */
  viewers: number
  /** Each operator with at least one open stream, with how many; sorted by `sub`. */
  operators: { sub: string; name?: string; viewers: number }[]
}

/**
 * Viewers and operators per session. Presence reads the replica's open viewer streams (nothing on the
 * event path has to report to it); in a cluster each replica also publishes its own counts to Redis with
 * an expiry, so a killed replica's viewers vanish from the view on their own.
 */
export interface Presence {
  /** Binds the replica's viewer streams (the cluster plugin does, once the app is ready). */
  setSource(source: ViewerSource): void
  of(kasmId: string): Promise<PresenceView>
  /** Views of several sessions at once (one pass over the viewers, one round trip to Redis). */
  ofMany(kasmIds: readonly string[]): Promise<Map<string, PresenceView>>
  close(): Promise<void>
}

type Counts = [sub: string, entry: { name?: string; viewers: number }][]

/** Groups viewers by session, then by operator. */
function countBySession(viewers: Iterable<WatchingViewer>, only?: string): Map<string, Counts> {
  const bySession = new Map<string, Map<string, { name?: string; viewers: number }>>()
  for (const v of viewers) {
    if (only !== undefined && v.kasmId !== only) continue
    let ops = bySession.get(v.kasmId)
    if (!ops) {
      ops = new Map()
      bySession.set(v.kasmId, ops)
    }
    const entry = ops.get(v.operator.sub) ?? {
      viewers: 0,
      ...(v.operator.name ? { name: v.operator.name } : {}),
    }
    entry.viewers++
    ops.set(v.operator.sub, entry)
  }
  return new Map([...bySession].map(([k, ops]) => [k, [...ops]]))
}

function view(kasmId: string, parts: Iterable<Counts>): PresenceView {
  const merged = new Map<string, { sub: string; name?: string; viewers: number }>()
  for (const part of parts) {
    for (const [sub, { name, viewers }] of part) {
      const m = merged.get(sub) ?? { sub, viewers: 0 }
      m.viewers += viewers
      if (name && !m.name) m.name = name
      merged.set(sub, m)
    }
  }
  const operators = [...merged.values()].sort((a, b) => (a.sub < b.sub ? -1 : a.sub > b.sub ? 1 : 0))
  return { kasmId, viewers: operators.reduce((n, o) => n + o.viewers, 0), operators }
}

/** {@link Presence} of a single replica: counted on demand from the open streams. */
export class MemoryPresence implements Presence {
  #source: ViewerSource = () => []

  setSource(source: ViewerSource): void {
    this.#source = source
  }

  async of(kasmId: string): Promise<PresenceView> {
    return view(kasmId, countBySession(this.#source(), kasmId).values())
  }

  async ofMany(kasmIds: readonly string[]): Promise<Map<string, PresenceView>> {
    const counts = countBySession(this.#source())
    return new Map(kasmIds.map((k) => [k, view(k, counts.has(k) ? [counts.get(k) as Counts] : [])]))
  }

  async close(): Promise<void> {}
}

/** Options of {@link RedisPresence}. */
export interface RedisPresenceOptions {
  readonly command: Redis
  readonly keys: ClusterKeys
  readonly replicaId: string
  /** How long a replica's published counts live without a refresh (GATEWAY_PRESENCE_TTL_MS). */
  readonly ttlMs: number
  readonly log: FastifyBaseLogger
}

/**
 * {@link Presence} over Redis. Every third of the TTL, each replica writes, per session it has viewers of,
 * one key with its counts (`SET PX ttl`) and its id into the session's index (a sorted set scored by
 * expiry), and withdraws the sessions it no longer has viewers of. A view merges this replica's live counts
 * with the other replicas' published ones, so it is exact here and at most a refresh behind elsewhere; a
 * killed replica drops out after the TTL. A Redis fault only delays publishing: the next refresh rewrites all.
 */
export class RedisPresence implements Presence {
  readonly #o: RedisPresenceOptions
  #source: ViewerSource = () => []
  /** Sessions this replica has published and not yet withdrawn. */
  #published = new Set<string>()
  readonly #timer: NodeJS.Timeout
  #publishing = false
  #closed = false

  constructor(options: RedisPresenceOptions) {
    this.#o = options
    this.#timer = setInterval(() => void this.publish(), Math.max(250, Math.floor(options.ttlMs / 3)))
    this.#timer.unref()
  }

  setSource(source: ViewerSource): void {
    this.#source = source
  }

  async of(kasmId: string): Promise<PresenceView> {
    return (await this.ofMany([kasmId])).get(kasmId) as PresenceView
  }

  async ofMany(kasmIds: readonly string[]): Promise<Map<string, PresenceView>> {
    const { command, keys, replicaId } = this.#o
    const now = Date.now()
    const pipeline = command.pipeline()
    for (const kasmId of kasmIds) pipeline.zrangebyscore(keys.presenceIndex(kasmId), now, '+inf')
    const indexes = (await pipeline.exec()) ?? []
    const failed = indexes.find(([err]) => err)?.[0]
    if (failed) throw failed
    const wanted: [kasmId: string, key: string][] = []
    kasmIds.forEach((kasmId, i) => {
      for (const r of (indexes[i]?.[1] as string[] | undefined) ?? []) {
        if (r !== replicaId) wanted.push([kasmId, keys.presence(kasmId, r)])
      }
    })
    const local = countBySession(this.#source())
    const parts = new Map<string, Counts[]>(
      kasmIds.map((k) => [k, local.has(k) ? [local.get(k) as Counts] : []]),
    )
    if (wanted.length > 0) {
      const values = await command.mget(...wanted.map(([, key]) => key))
      values.forEach((value, i) => {
        if (value === null) return
        try {
          parts.get((wanted[i] as [string, string])[0])?.push(JSON.parse(value) as Counts)
        } catch {
          // A record this version cannot read is skipped, never fatal.
        }
      })
    }
    return new Map(kasmIds.map((k) => [k, view(k, parts.get(k) ?? [])]))
  }

  /** Writes this replica's counts now (the timer calls it; tests call it to skip the wait). */
  async publish(): Promise<void> {
    if (this.#closed || this.#publishing) return
    this.#publishing = true
    const { command, keys, replicaId, ttlMs, log } = this.#o
    try {
      const now = Date.now()
      const counts = countBySession(this.#source())
      const pipeline = command.pipeline()
      for (const [kasmId, c] of counts) {
        const index = keys.presenceIndex(kasmId)
        pipeline.set(keys.presence(kasmId, replicaId), JSON.stringify(c), 'PX', ttlMs)
        pipeline.zadd(index, now + ttlMs, replicaId)
        pipeline.zremrangebyscore(index, '-inf', now)
        pipeline.pexpire(index, ttlMs, 'GT')
        pipeline.pexpire(index, ttlMs, 'NX')
      }
      const gone = [...this.#published].filter((k) => !counts.has(k))
      for (const kasmId of gone) {
        pipeline.del(keys.presence(kasmId, replicaId))
        pipeline.zrem(keys.presenceIndex(kasmId), replicaId)
      }
      if (pipeline.length === 0) return
      const results = await pipeline.exec()
      const err = results?.find(([e]) => e)?.[0]
      if (err) throw err
      this.#published = new Set(counts.keys())
    } catch (err) {
      log.debug({ err }, 'presence not published; retrying with the next refresh')
    } finally {
      this.#publishing = false
    }
  }

  /** Withdraws this replica's presence at once (shutdown), so the view does not wait for the TTL. */
  async close(): Promise<void> {
    this.#closed = true
    clearInterval(this.#timer)
    const { command, keys, replicaId } = this.#o
    if (this.#published.size === 0) return
    const pipeline = command.pipeline()
    for (const kasmId of this.#published) {
      pipeline.del(keys.presence(kasmId, replicaId))
      pipeline.zrem(keys.presenceIndex(kasmId), replicaId)
    }
    await pipeline.exec().catch(() => {})
    this.#published.clear()
  }
}
