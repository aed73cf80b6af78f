import type { FastifyBaseLogger } from 'fastify'
import { Cluster } from 'ioredis'
import type { ConnectionRole, RedisClient } from './connections.ts'

/**
 * Where the replica stands with Redis, as one state for all three connections:
 * - `connecting`: since boot, never had every connection ready (not ready: nothing is loaded yet);
 * - `up`: every connection is ready;
 * - `down`: one was lost after the replica had been up. The replica serves what needs no Redis (degraded
 *   mode, see docs/cluster.md) until every connection is ready again.
 */
export type RedisState =
  | { readonly kind: 'connecting' }
  | { readonly kind: 'up'; readonly since: number }
  | {
      readonly kind: 'down'
      readonly since: number
      readonly connection: ConnectionRole
      readonly reason: string
    }

/**
 * Follows the replica's Redis connections and logs each change of {@link RedisState} once: a warning when Redis
 * goes away (which connection, why, no stack trace), an info line when it is back (and how long it was away).
 * ioredis repeats an error on every reconnect attempt: those, and the failures other components see meanwhile,
 * are logged at debug (components ask {@link RedisHealth.down}).
 */
export class RedisHealth {
  readonly #connections: ReadonlyMap<ConnectionRole, RedisClient>
  readonly #log: FastifyBaseLogger
  #state: RedisState = { kind: 'connecting' }
  /** The replica is closing its connections itself (shutdown): their close is no outage. */
  #closing = false
  /** Why each connection last failed, for the warning when the state changes. */
  readonly #lastError = new Map<ConnectionRole, string>()

  constructor(connections: Record<ConnectionRole, RedisClient>, log: FastifyBaseLogger) {
    this.#connections = new Map(Object.entries(connections) as [ConnectionRole, RedisClient][])
    this.#log = log
    for (const [role, connection] of this.#connections) {
      connection.on('error', (err: Error & { code?: string }) => {
        this.#lastError.set(role, err.code ? `${err.code}: ${err.message}` : err.message)
        this.#log.debug({ connection: role, reason: this.#lastError.get(role) }, 'redis connection error')
        // A Redis Cluster that is still ready reports the trouble of one node (a failover in progress, a
        // sharded subscriber that could not connect yet): no outage of the replica, and no `ready` would
        // follow to end one. Its loss is its `close`.
        if (connection instanceof Cluster && connection.status === 'ready') return
        this.#lost(role)
      })
      connection.on('close', () => this.#lost(role))
      connection.on('ready', () => this.#readied())
    }
  }

  get state(): RedisState {
    return this.#state
  }

  /**
   * True while Redis is away after the replica had been up: failures that follow from it are expected.
   * A socket Redis has already closed is a loss too, although ioredis tells of it only a moment later: a
   * command refused in that moment ("Stream isn't writeable") is part of the outage this reports, not
   * a failure of its own.
   */
  get down(): boolean {
    if (this.#state.kind === 'up') {
      for (const [role, connection] of this.#connections) if (!usable(connection)) this.#lost(role)
    }
    return this.#state.kind === 'down'
  }

  /** Says the connections are about to be closed on purpose, so shutting down logs no outage warning. */
  closing(): void {
    this.#closing = true
  }

  #lost(role: ConnectionRole): void {
    if (this.#state.kind !== 'up' || this.#closing) return
    const reason = this.#lastError.get(role) ?? 'connection closed'
    this.#state = { kind: 'down', since: Date.now(), connection: role, reason }
    this.#log.warn(
      { connection: role, reason },
      'redis unavailable: serving what needs no redis (degraded) until it is back',
    )
  }

  #readied(): void {
    for (const connection of this.#connections.values()) if (connection.status !== 'ready') return
    const was = this.#state
    this.#state = { kind: 'up', since: Date.now() }
    this.#lastError.clear()
    if (was.kind === 'down') this.#log.info({ downMs: Date.now() - was.since }, 'redis available again')
  }
}

/**
 * Whether a command sent now would be written (ioredis's own test before it refuses one). A Cluster has no
 * one socket: ready means it knows the slots, and a node it lost is reported by the command that needed it.
 */
function usable(connection: RedisClient): boolean {
  if (connection.status !== 'ready') return false
  return connection instanceof Cluster || connection.stream.writable
}
