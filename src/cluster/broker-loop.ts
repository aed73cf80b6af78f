import type { FastifyBaseLogger } from 'fastify'
import type { BrokerDelivery, BrokerListener } from '../events/broker/broker.ts'
import type { BusMessage } from '../events/bus.ts'
import type { RedisClient } from './connections.ts'
import { decodeEntry, type RawEntry } from './stream-entry.ts'

/** How a replica turns a message into its SSE frame (the events folder's framing, done once per event). */
export type FrameFn = (message: BusMessage) => Buffer

/** A delivery read from a session's Redis stream; its offset is the entry id. */
export type StreamDelivery = BrokerDelivery<string>

/** One session's stream as the loop reads it: where it is, and the one listener (the hub). */
export interface WatchedStream {
  readonly kasmId: string
  readonly key: string
  /** Last id the loop read for this stream. */
  cursor: string
  readonly listener: BrokerListener<string>
}

/** Options of the read loop. */
export interface StreamLoopOptions {
  readonly command: RedisClient
  readonly blocking: RedisClient
  readonly streamKey: (kasmId: string) => string
  readonly frame: FrameFn
  readonly log: FastifyBaseLogger
  /** True while Redis is known to be away (its outage is logged elsewhere): read failures go to debug. */
  readonly quiet?: () => boolean
  /** How long one XREAD blocks (ms). */
  readonly blockMs?: number
  /** Entries read per stream per XREAD. */
  readonly batch?: number
  readonly onRead?: (entries: number) => void
}

/**
 * The replica's one `XREAD BLOCK` loop over every watched session's stream: one blocking connection however
 * many sessions. A new stream joins by waking the blocked call with `CLIENT UNBLOCK` from the command
 * connection. Each entry is decoded and framed once, then handed to the session's listener.
 */
export class StreamLoop {
  readonly #o: Required<Omit<StreamLoopOptions, 'onRead' | 'quiet'>> &
    Pick<StreamLoopOptions, 'onRead' | 'quiet'>
  readonly #watched = new Map<string, WatchedStream>()
  #clientId: number | undefined
  #iteration = 0
  #inRead = false
  #dirty = false
  #failing = false
  #idle: (() => void) | undefined
  #closed = false
  #loop: Promise<void> | undefined

  constructor(options: StreamLoopOptions) {
    this.#o = { blockMs: 5000, batch: 1000, ...options }
    // A reconnected blocking connection has a new client id (and its XREAD was dropped: the loop retries).
    this.#o.blocking.on('ready', () => {
      this.#clientId = undefined
      this.#wake()
    })
  }

  /** Number of sessions currently read by the loop (a metric). */
  get watchedCount(): number {
    return this.#watched.size
  }

  /** Reads `kasmId`'s stream after `from` from now on, handing what it reads to `listener`. */
  watch(kasmId: string, from: string, listener: BrokerListener<string>): WatchedStream {
    const w: WatchedStream = { kasmId, key: this.#o.streamKey(kasmId), cursor: from, listener }
    this.#watched.set(kasmId, w)
    this.#wake()
    return w
  }

  /** Stops reading a stream (a later `watch` of the same session has replaced it: then nothing). */
  unwatch(w: WatchedStream): void {
    if (this.#watched.get(w.kasmId) === w) this.#watched.delete(w.kasmId)
  }

  /** The entries as deliveries (entries this version cannot read are skipped). */
  frames(raw: readonly RawEntry[]): StreamDelivery[] {
    const out: StreamDelivery[] = []
    for (const entry of raw) {
      const decoded = decodeEntry(entry)
      if (decoded)
        out.push({ offset: decoded.id, message: decoded.message, frame: this.#o.frame(decoded.message) })
    }
    return out
  }

  /** Starts the loop (once). */
  start(): void {
    this.#loop ??= this.#run()
  }

  /** Stops the loop; the caller closes the connections afterwards. */
  async close(): Promise<void> {
    this.#closed = true
    this.#watched.clear()
    this.#wake()
    await this.#loop
  }

  /** Makes the loop re-read its stream list now: resolves an idle wait, or unblocks the running XREAD. */
  #wake(): void {
    this.#dirty = true
    const idle = this.#idle
    if (idle) {
      this.#idle = undefined
      idle()
      return
    }
    if (!this.#inRead || this.#clientId === undefined) return
    const iteration = this.#iteration
    const id = this.#clientId
    const attempt = (left: number): void => {
      if (!this.#inRead || this.#iteration !== iteration) return
      this.#o.command
        .client('UNBLOCK', id)
        .then((n) => {
          // 0: the XREAD has not reached Redis yet (two connections, no ordering between them): try again.
          if (Number(n) === 0 && left > 0) setTimeout(() => attempt(left - 1), 5).unref()
        })
        .catch(() => {})
    }
    attempt(40)
  }

  async #run(): Promise<void> {
    const { blocking, blockMs, batch, log } = this.#o
    while (!this.#closed) {
      this.#dirty = false
      const streams = [...this.#watched.values()]
      if (streams.length === 0) {
        await new Promise<void>((resolve) => {
          this.#idle = resolve
        })
        continue
      }
      try {
        if (this.#clientId === undefined) {
          this.#clientId = Number(await blocking.client('ID'))
          // The stream list may have changed while the id was fetched: no await from here to the XREAD.
          if (this.#dirty) continue
        }
        const iteration = ++this.#iteration
        // A socket that died without a close (network partition) would block forever: force a reconnect.
        const watchdog = setTimeout(() => {
          if (this.#iteration === iteration && this.#inRead) blocking.disconnect(true)
        }, blockMs + 5000)
        watchdog.unref()
        this.#inRead = true
        let reply: [string, RawEntry[]][] | null
        try {
          reply = (await blocking.xread(
            'COUNT',
            batch,
            'BLOCK',
            blockMs,
            'STREAMS',
            ...streams.map((w) => w.key),
            ...streams.map((w) => w.cursor),
          )) as [string, RawEntry[]][] | null
        } finally {
          this.#inRead = false
          clearTimeout(watchdog)
        }
        this.#failing = false
        if (reply) this.#dispatch(streams, reply)
      } catch (err) {
        if (this.#closed) break
        // Once per failure at warn, unless Redis is known to be away; retries of the same failure at debug.
        if (this.#failing || this.#o.quiet?.())
          log.debug({ err }, 'event stream read from RedisClient failed again')
        else log.warn({ err }, 'event stream read from RedisClient failed; retrying until it is back')
        this.#failing = true
        this.#clientId = undefined
        await this.#pause(blocking)
      }
    }
  }

  #dispatch(streams: readonly WatchedStream[], reply: [string, RawEntry[]][]): void {
    const byKey = new Map(streams.map((w) => [w.key, w]))
    let read = 0
    for (const [key, raw] of reply) {
      const w = byKey.get(key)
      const last = raw.at(-1)
      if (!w || !last) continue
      read += raw.length
      // The stream may have been unwatched and watched again meanwhile: only the live watch advances.
      if (this.#watched.get(w.kasmId) !== w) continue
      w.cursor = last[0]
      w.listener.broadcast(this.frames(raw), last[0])
    }
    this.#o.onRead?.(read)
  }

  /** Waits for the blocking connection to come back (or a short pause), without spinning. */
  #pause(blocking: RedisClient): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        blocking.off('ready', done)
        resolve()
      }
      const timer = setTimeout(done, blocking.status === 'ready' ? 100 : 1000)
      timer.unref()
      blocking.once('ready', done)
    })
  }
}
