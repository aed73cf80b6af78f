import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { BusMessage, Delivery, Subscriber } from '../events/bus.ts'
import { ViewerCursor } from '../events/viewer-cursor.ts'
import { compareIds, decodeEntry, type RawEntry } from './stream-entry.ts'

/** How a replica turns a message into its SSE frame (the events folder's framing, done once per event). */
export type FrameFn = (message: BusMessage) => Buffer

/** A delivery read from a session's Redis stream, with its entry id. */
export type StreamDelivery = Delivery & { readonly id: string }

/**
 * One viewer of a session's Redis stream. Deliveries are filtered twice: by stream id (the loop and a replay
 * may overlap) and by the {@link ViewerCursor} rule on (run, seq), which also catches the re-append of a run
 * after Redis lost its data and the new owner read the run again from the runtime.
 */
export class StreamViewer extends ViewerCursor {
  lastId: string
  active = true

  constructor(
    readonly subscriber: Subscriber,
    lastId = '0-0',
  ) {
    super()
    this.lastId = lastId
  }

  /** Seeds the (run, seq) filter from the viewer's `after=&run=`. */
  startAfter(run: string, seq: number): void {
    this.run = run
    this.seq = seq
  }

  /** Whether this viewer still needs the entry `id` (and records it as delivered when so). */
  take(id: string, message: BusMessage): boolean {
    if (compareIds(id, this.lastId) <= 0) return false
    this.lastId = id
    return this.admit(message)
  }

  protected override admits(d: Delivery): boolean {
    return this.take((d as StreamDelivery).id, d.message)
  }

  /** Hands the viewer whatever of `batch` it has not had yet, in one call (the shared array when all of it). */
  offer(batch: readonly StreamDelivery[], replay: boolean): void {
    if (!this.active || batch.length === 0) return
    const deliver = this.admitAll(batch)
    if (deliver.length > 0) this.subscriber.deliver(deliver, replay)
  }
}

interface Watched {
  readonly kasmId: string
  readonly key: string
  /** Last id the loop read for this stream; undefined until the first viewer's replay fixed it. */
  cursor: string | undefined
  readonly viewers: Set<StreamViewer>
  /** Viewers whose replay is in flight: the stream stays watched while they catch up. */
  pending: number
}

/** Options of the fan-out loop. */
export interface FanoutOptions {
  readonly command: Redis
  readonly blocking: Redis
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
 * many sessions and viewers. A new stream joins by waking the blocked call with `CLIENT UNBLOCK` from the
 * command connection. Each entry is decoded and framed once, then offered to every viewer of that session.
 */
export class StreamFanout {
  readonly #o: Required<Omit<FanoutOptions, 'onRead' | 'quiet'>> & Pick<FanoutOptions, 'onRead' | 'quiet'>
  readonly #watched = new Map<string, Watched>()
  #clientId: number | undefined
  #iteration = 0
  #inRead = false
  #dirty = false
  #failing = false
  #idle: (() => void) | undefined
  #closed = false
  #loop: Promise<void> | undefined

  constructor(options: FanoutOptions) {
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

  /** Registers interest before a replay, so the stream stays watched while the viewer catches up. */
  reserve(kasmId: string): void {
    this.#get(kasmId).pending++
  }

  /**
   * Joins a viewer whose replay ended at `position.lastId`. If the loop already read past that point, the
   * entries in between are fetched and offered first, so nothing the other viewers got is skipped.
   */
  async join(kasmId: string, position: StreamViewer): Promise<void> {
    const w = this.#get(kasmId)
    try {
      for (let round = 0; position.active && !this.#closed; round++) {
        if (w.cursor === undefined) {
          w.cursor = position.lastId
          w.viewers.add(position)
          this.#wake()
          return
        }
        if (compareIds(position.lastId, w.cursor) >= 0) {
          w.viewers.add(position)
          return
        }
        // Where the loop was when the XRANGE went out: Redis runs the XRANGE after that, so an empty answer
        // means nothing is stored between the viewer and this point. The loop may read further while the
        // answer is on its way (two connections, no order between their replies): what it read meanwhile is
        // fetched by the next round, never skipped by jumping to where the loop is now.
        const sent = w.cursor
        const raw = (await this.#o.command.xrange(
          w.key,
          `(${position.lastId}`,
          '+',
          'COUNT',
          this.#o.batch,
        )) as RawEntry[]
        if (raw.length === 0) {
          // Nothing between (trimmed, or Redis lost it): continue from the loop's position at the XRANGE.
          position.lastId = sent
          continue
        }
        if (round > 100) {
          // A viewer that never catches up (the stream grows faster than it pages): join where the loop is.
          position.lastId = w.cursor
          continue
        }
        position.offer(this.#frames(raw), true)
      }
    } finally {
      w.pending--
      this.#forget(w)
    }
  }

  /** Removes a viewer. */
  leave(kasmId: string, position: StreamViewer): void {
    position.active = false
    const w = this.#watched.get(kasmId)
    if (!w) return
    w.viewers.delete(position)
    this.#forget(w)
  }

  /** Starts the loop (once). */
  start(): void {
    this.#loop ??= this.#run()
  }

  /** Stops the loop; the caller closes the connections afterwards. */
  async close(): Promise<void> {
    this.#closed = true
    for (const w of this.#watched.values()) for (const v of w.viewers) v.active = false
    this.#watched.clear()
    this.#wake()
    await this.#loop
  }

  #get(kasmId: string): Watched {
    let w = this.#watched.get(kasmId)
    if (!w) {
      w = { kasmId, key: this.#o.streamKey(kasmId), cursor: undefined, viewers: new Set(), pending: 0 }
      this.#watched.set(kasmId, w)
    }
    return w
  }

  #forget(w: Watched): void {
    if (w.viewers.size === 0 && w.pending === 0 && this.#watched.get(w.kasmId) === w) {
      this.#watched.delete(w.kasmId)
    }
  }

  #frames(raw: readonly RawEntry[]): StreamDelivery[] {
    const out: StreamDelivery[] = []
    for (const entry of raw) {
      const decoded = decodeEntry(entry)
      if (decoded)
        out.push({ id: decoded.id, message: decoded.message, frame: this.#o.frame(decoded.message) })
    }
    return out
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
      const streams = [...this.#watched.values()].filter((w) => w.cursor !== undefined && w.viewers.size > 0)
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
            ...streams.map((w) => w.cursor as string),
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
          log.debug({ err }, 'event stream read from Redis failed again')
        else log.warn({ err }, 'event stream read from Redis failed; retrying until it is back')
        this.#failing = true
        this.#clientId = undefined
        await this.#pause(blocking)
      }
    }
  }

  #dispatch(streams: readonly Watched[], reply: [string, RawEntry[]][]): void {
    const byKey = new Map(streams.map((w) => [w.key, w]))
    let read = 0
    for (const [key, raw] of reply) {
      const w = byKey.get(key)
      const last = raw.at(-1)
      if (!w || !last) continue
      read += raw.length
      // The watched entry may have been dropped and re-created meanwhile: only the live one advances.
      if (this.#watched.get(w.kasmId) !== w) continue
      w.cursor = last[0]
      const frames = this.#frames(raw)
      for (const viewer of w.viewers) viewer.offer(frames, false)
    }
    this.#o.onRead?.(read)
  }

  /** Waits for the blocking connection to come back (or a short pause), without spinning. */
  #pause(blocking: Redis): Promise<void> {
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
