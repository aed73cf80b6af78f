import type { FastifyBaseLogger } from 'fastify'
import type { ChainableCommander } from 'ioredis'
import {
  type Counts,
  countBySession,
  type Presence,
  type PresenceView,
  type ViewerSource,
  view,
} from '../events/presence.ts'
import { pipelined, type SlotStep } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/** The shape the cluster tests build viewers with. */
export type { WatchingViewer } from '../events/presence.ts'

/** Options of {@link RedisPresence}. */
export interface RedisPresenceOptions {
  readonly command: RedisClient
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
    // A session's presence keys share its slot: one group per session (one pipeline with one Redis).
    const indexes = await pipelined(
      command,
      kasmIds.map(
        (kasmId) => (p: ChainableCommander) => p.zrangebyscore(keys.presenceIndex(kasmId), now, '+inf'),
      ),
    )
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
      const values = await pipelined(
        command,
        wanted.map(
          ([, key]) =>
            (p: ChainableCommander) =>
              p.get(key),
        ),
      )
      values.forEach(([err, value], i) => {
        if (err) throw err
        if (typeof value !== 'string') return
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
      const groups: SlotStep[] = []
      for (const [kasmId, c] of counts) {
        const index = keys.presenceIndex(kasmId)
        groups.push((p) =>
          p
            .set(keys.presence(kasmId, replicaId), JSON.stringify(c), 'PX', ttlMs)
            .zadd(index, now + ttlMs, replicaId)
            .zremrangebyscore(index, '-inf', now)
            .pexpire(index, ttlMs, 'GT')
            .pexpire(index, ttlMs, 'NX'),
        )
      }
      const gone = [...this.#published].filter((k) => !counts.has(k))
      for (const kasmId of gone) groups.push(this.#withdraw(kasmId))
      if (groups.length === 0) return
      const results = await pipelined(command, groups)
      const err = results.find(([e]) => e)?.[0]
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
    if (this.#published.size === 0) return
    await pipelined(
      this.#o.command,
      [...this.#published].map((kasmId) => this.#withdraw(kasmId)),
    ).catch(() => {})
    this.#published.clear()
  }

  /** Removes this replica's presence of one session (one slot: the session's). */
  #withdraw(kasmId: string): SlotStep {
    const { keys, replicaId } = this.#o
    return (p) => p.del(keys.presence(kasmId, replicaId)).zrem(keys.presenceIndex(kasmId), replicaId)
  }
}
