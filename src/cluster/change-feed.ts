import type { FastifyBaseLogger } from 'fastify'
import { Cluster } from 'ioredis'
import type { RedisClient } from './connections.ts'

/** What a channel listener gets: each message, and a call to re-read everything after a disconnection. */
export interface ChannelListener {
  message(payload: string): void
  /** Messages may have been missed (the subscriber was disconnected): re-read the shared state. */
  resync(): void
}

/**
 * Pub/sub over the replica's one subscriber connection, shared by every store that needs change
 * notifications. Pub/sub drops what is published while a replica is disconnected, so after every reconnect
 * the channels are subscribed again and, once that is confirmed, each listener re-reads its state: a change
 * made meanwhile is found by the re-read, a change made later arrives as a message.
 */
export class ChangeFeed {
  readonly #subscriber: RedisClient
  readonly #log: FastifyBaseLogger
  readonly #channels = new Map<string, Set<ChannelListener>>()
  #wasReady = false

  constructor(subscriber: RedisClient, log: FastifyBaseLogger) {
    this.#subscriber = subscriber
    this.#log = log
    subscriber.on('message', (channel: string, payload: string) => {
      for (const l of this.#channels.get(channel) ?? []) l.message(payload)
    })
    subscriber.on('ready', () => void this.#reconnected())
    this.#wasReady = subscriber.status === 'ready'
    if (subscriber instanceof Cluster) this.#followNodeSwitches(subscriber)
  }

  /**
   * On a Redis Cluster, ioredis subscribes through one node's connection and, when that connection ends (the
   * node died, the socket was dropped), subscribes again through another node by itself, telling nobody: what
   * was published in between is lost, and the cluster emits no `ready`. So every second the feed looks which
   * connection ioredis subscribes through (a private field: ioredis has no event for it) and, when it changed,
   * subscribes every channel again (confirmed by the new connection) and has every listener re-read, as after
   * a reconnect. Without that field (another ioredis version) it warns once and relies on `ready` alone.
   */
  #followNodeSwitches(cluster: Cluster): void {
    const internal = cluster as unknown as { subscriber?: { getInstance?: () => unknown } }
    if (typeof internal.subscriber?.getInstance !== 'function') {
      this.#log.warn(
        'this ioredis has no cluster subscriber to follow: a subscriber moved to another node is not resynchronised',
      )
      return
    }
    let seen = internal.subscriber.getInstance()
    const timer = setInterval(() => {
      const now = internal.subscriber?.getInstance?.() ?? null
      if (now === seen || now === null) return
      seen = now
      if (cluster.status === 'ready') void this.#reconnected()
    }, 1000)
    timer.unref()
    cluster.once('end', () => clearInterval(timer))
  }

  /** Subscribes `listener` to `channel`; resolves once the subscription is active (or Redis is down). */
  async listen(channel: string, listener: ChannelListener): Promise<() => void> {
    let set = this.#channels.get(channel)
    if (!set) {
      set = new Set()
      this.#channels.set(channel, set)
    }
    set.add(listener)
    if (this.#subscriber.status === 'ready') {
      await this.#subscriber.subscribe(channel).catch((err: unknown) => {
        this.#log.warn({ err, channel }, 'subscribe failed; will resubscribe on reconnect')
      })
    }
    return () => {
      set.delete(listener)
      if (set.size === 0) {
        this.#channels.delete(channel)
        if (this.#subscriber.status === 'ready') this.#subscriber.unsubscribe(channel).catch(() => {})
      }
    }
  }

  async #reconnected(): Promise<void> {
    const channels = [...this.#channels.keys()]
    const first = !this.#wasReady
    this.#wasReady = true
    if (channels.length === 0) return
    try {
      // ioredis re-subscribes by itself; subscribing again is harmless and tells us when it is in effect.
      await this.#subscriber.subscribe(...channels)
    } catch (err) {
      this.#log.warn({ err }, 'resubscribe failed; waiting for the next reconnect')
      return
    }
    if (first) this.#log.debug('change feed subscribed')
    for (const channel of channels) for (const l of this.#channels.get(channel) ?? []) l.resync()
  }
}
