import type { FastifyBaseLogger } from 'fastify'
import {
  type Counts,
  countBySession,
  type Presence,
  type PresenceView,
  type ViewerSource,
  view,
} from '../events/presence.ts'
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
 * {@link Presence} over Redis. Each replica keeps one hash of its counts, session by session
 * (`presence:of:{<replica>}`, expiring after the TTL), and its id in the set of live replicas (a sorted set
 * scored by expiry). Every third of the TTL it writes only the sessions whose counts changed, drops the ones it
 * no longer has viewers of and refreshes both expiries: a refresh costs a few commands however many sessions
 * it watches, where one key per session and replica cost five commands each (bursts that held up the event
 * path at 2,000 sessions). A view merges this replica's live counts with the other live replicas' hashes (one
 * HMGET each), so it is exact here and at most a refresh behind elsewhere; a killed replica drops out after
 * the TTL. A Redis fault only delays publishing: the next refresh writes everything again.
 */
export class RedisPresence implements Presence {
  readonly #o: RedisPresenceOptions
  #source: ViewerSource = () => []
  /** What this replica's hash holds, as written (JSON by session); null: write everything at the next refresh. */
  #published: Map<string, string> | null = null
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
    const local = countBySession(this.#source())
    const parts = new Map<string, Counts[]>(
      kasmIds.map((k) => [k, local.has(k) ? [local.get(k) as Counts] : []]),
    )
    if (kasmIds.length > 0) {
      const live = await command.zrangebyscore(keys.presenceReplicas, Date.now(), '+inf')
      const others = live.filter((r) => r !== replicaId)
      const hashes = await Promise.all(others.map((r) => command.hmget(keys.presenceOf(r), ...kasmIds)))
      for (const values of hashes) {
        values.forEach((value, i) => {
          if (value === null) return
          try {
            parts.get(kasmIds[i] as string)?.push(JSON.parse(value) as Counts)
          } catch {
            // A record this version cannot read is skipped, never fatal.
          }
        })
      }
    }
    return new Map(kasmIds.map((k) => [k, view(k, parts.get(k) ?? [])]))
  }

  /** Writes this replica's changed counts now (the timer calls it; tests call it to skip the wait). */
  async publish(): Promise<void> {
    if (this.#closed || this.#publishing) return
    this.#publishing = true
    const { command, keys, replicaId, ttlMs, log } = this.#o
    const key = keys.presenceOf(replicaId)
    try {
      const now = Date.now()
      const current = new Map<string, string>()
      for (const [kasmId, c] of countBySession(this.#source())) current.set(kasmId, JSON.stringify(c))
      const before = this.#published
      const changed: string[] = []
      for (const [kasmId, json] of current) if (before?.get(kasmId) !== json) changed.push(kasmId, json)
      const gone = before === null ? [] : [...before.keys()].filter((k) => !current.has(k))
      // Everything published is forgotten until this refresh succeeds: a failure makes the next one write all.
      this.#published = null
      // Separate commands, not one pipeline: the hash and the set of replicas may live in two slots.
      if (before === null) await command.del(key)
      if (changed.length > 0) await command.hset(key, ...changed)
      if (gone.length > 0) await command.hdel(key, ...gone)
      const [kept] = await Promise.all([
        command.pexpire(key, ttlMs),
        command.zadd(keys.presenceReplicas, now + ttlMs, replicaId),
        command.zremrangebyscore(keys.presenceReplicas, '-inf', now),
      ])
      // The hash expired or Redis lost it (an outage longer than the TTL, a restart): write it whole next time.
      if (kept === 0 && current.size > 0) return
      this.#published = current
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
    this.#published = null
    await Promise.all([
      command.del(keys.presenceOf(replicaId)),
      command.zrem(keys.presenceReplicas, replicaId),
    ]).catch(() => {})
  }
}
