import type { FastifyBaseLogger } from 'fastify'
import type { ChainableCommander } from 'ioredis'
import { MemoryStreamSlots, type StreamSlots } from '../events/stream-slots.ts'
import { pipelined } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'

/** Options of {@link RedisStreamSlots}. */
export interface RedisStreamSlotsOptions {
  readonly command: RedisClient & ClusterCommands
  readonly keys: ClusterKeys
  readonly replicaId: string
  /** GATEWAY_MAX_STREAMS_PER_OPERATOR, over every replica. */
  readonly max: number
  /** How long a slot outlives its replica's last renewal (GATEWAY_PRESENCE_TTL_MS); renewed every third. */
  readonly ttlMs: number
  readonly log: FastifyBaseLogger
  /** While true (Redis is known to be down), failures that follow from it log at debug: one warning per outage. */
  readonly quiet?: () => boolean
}

/**
 * The cluster's {@link StreamSlots}: one sorted set per operator of `<replica>:<n>` members scored by their
 * expiry. Taking a slot drops the expired members and adds one only under the cap, in one script; this replica
 * renews the members it holds every third of the TTL, so those of a replica that died expire by themselves.
 * While Redis cannot be reached the cap falls back to this replica's own count (streams then need Redis
 * anyway): a slot is never refused for an outage alone.
 */
export class RedisStreamSlots implements StreamSlots {
  readonly #o: RedisStreamSlotsOptions
  /** Members this replica holds, by operator. */
  readonly #held = new Map<string, string[]>()
  readonly #fallback: MemoryStreamSlots
  /** Slots taken from the fallback while Redis was away, by operator. */
  readonly #local = new Map<string, number>()
  #next = 0
  readonly #timer: NodeJS.Timeout

  constructor(options: RedisStreamSlotsOptions) {
    this.#o = options
    this.#fallback = new MemoryStreamSlots(options.max)
    this.#timer = setInterval(() => void this.#renew(), Math.max(100, Math.floor(options.ttlMs / 3)))
    this.#timer.unref()
  }

  async take(sub: string): Promise<boolean> {
    const { command, keys, replicaId, max, ttlMs, log } = this.#o
    const member = `${replicaId}:${this.#next++}`
    let taken: number
    try {
      taken = await command.krgTakeSlot(keys.streamSlots(sub), member, max, ttlMs)
    } catch (err) {
      log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err },
        'stream slots unavailable in redis; counting on this replica only',
      )
      const ok = await this.#fallback.take(sub)
      if (ok) this.#local.set(sub, (this.#local.get(sub) ?? 0) + 1)
      return ok
    }
    if (taken !== 1) return false
    const held = this.#held.get(sub)
    if (held === undefined) this.#held.set(sub, [member])
    else held.push(member)
    return true
  }

  give(sub: string): void {
    const local = this.#local.get(sub) ?? 0
    if (local > 0) {
      if (local === 1) this.#local.delete(sub)
      else this.#local.set(sub, local - 1)
      this.#fallback.give(sub)
      return
    }
    const held = this.#held.get(sub)
    const member = held?.pop()
    if (member === undefined) return
    if (held?.length === 0) this.#held.delete(sub)
    this.#o.command.zrem(this.#o.keys.streamSlots(sub), member).catch((err: unknown) => {
      // Not renewed any more: it expires within the TTL.
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err },
        'stream slot not released in redis; it expires',
      )
    })
  }

  async close(): Promise<void> {
    clearInterval(this.#timer)
    const held = [...this.#held]
    this.#held.clear()
    // One slot per operator on a Redis Cluster.
    await pipelined(
      this.#o.command,
      held.map(
        ([sub, members]) =>
          (p: ChainableCommander) =>
            p.zrem(this.#o.keys.streamSlots(sub), ...members),
      ),
    ).catch(() => {})
  }

  /** Pushes the expiry of every member this replica holds (by Redis's clock, like the take). */
  async #renew(): Promise<void> {
    if (this.#held.size === 0) return
    const { command, keys, ttlMs } = this.#o
    // ioredis adds defined scripts to pipelines too; its typings only know them on the connection.
    type WithRenew = ChainableCommander & {
      krgRenewSlots(slots: string, ttlMs: number, ...members: string[]): ChainableCommander
    }
    const results = await pipelined(
      command,
      [...this.#held].map(
        ([sub, members]) =>
          (p: ChainableCommander) =>
            (p as WithRenew).krgRenewSlots(keys.streamSlots(sub), ttlMs, ...members),
      ),
    ).catch((err: unknown) => [[err, null]])
    const err = results?.find(([e]) => e)?.[0]
    if (err)
      this.#o.log[this.#o.quiet?.() ? 'debug' : 'warn'](
        { err },
        'stream slots not renewed; they expire unless the next renewal works',
      )
  }
}
