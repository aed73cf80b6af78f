import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { BrokerListener } from '../events/broker/broker.ts'
import type { RedisClient } from './connections.ts'
import { compareIds, deliveriesOf, type FrameFn, type RawEntry } from './stream-entry.ts'

/**
 * The subscriber side of the live channels: plain pub/sub on one Redis, sharded pub/sub (`SSUBSCRIBE`) where
 * the append script publishes with `SPUBLISH`. The loop needs only these four things of it.
 */
export interface LiveChannels {
  /** Resolves once Redis confirmed every subscription (so an append after it is heard). */
  subscribe(channels: readonly string[]): Promise<unknown>
  unsubscribe(channels: readonly string[]): Promise<unknown>
  /** Every publication on a subscribed channel. */
  onMessage(listener: (channel: string, payload: Buffer) => void): void
  /** The connection is (again) ready: publications may have been missed since the last one. */
  onReady(listener: () => void): void
  /** Whether commands can be sent now. */
  readonly ready: boolean
  /** A round trip on the subscriber connection (PING is valid while subscribed). */
  ping(): Promise<unknown>
  /** Drops the connection and connects again (its socket stopped answering). */
  reconnect(): void
}

/** Plain (`SUBSCRIBE`) or sharded (`SSUBSCRIBE`) channels over one ioredis connection. */
export function liveChannels(connection: Redis, sharded: boolean): LiveChannels {
  return {
    subscribe: (channels) =>
      sharded ? connection.ssubscribe(...channels) : connection.subscribe(...channels),
    unsubscribe: (channels) =>
      sharded ? connection.sunsubscribe(...channels) : connection.unsubscribe(...channels),
    onMessage: (listener) => {
      connection.on(sharded ? 'smessageBuffer' : 'messageBuffer', (channel: Buffer, payload: Buffer) =>
        listener(channel.toString(), payload),
      )
    },
    onReady: (listener) => {
      connection.on('ready', listener)
    },
    get ready() {
      return connection.status === 'ready'
    },
    ping: () => connection.ping(),
    reconnect: () => connection.disconnect(true),
  }
}

/** What the append script publishes: the stream's last id before the append, then the entries it added. */
type Publication = { readonly prev: string; readonly entries: RawEntry[] }

/** Why the loop read a stream (the `krg_cluster_live_reads_total` label). */
export type LiveReadReason = 'join' | 'gap' | 'resync'

/**
 * Where one watched stream is:
 * - `subscribing`: its channel is not yet confirmed (just watched, or after a reconnect). Publications are
 *   dropped: the read that follows the confirmation finds what they carried.
 * - `reading`: the stream is being read from the cursor to its end (joining, a gap, a resync). Publications
 *   wait in `pending`: one may come after the read ran. `again`: they overflowed, read once more.
 * - `live`: publications are handed on as they come; one whose `prev` is past the cursor is a gap.
 */
type LiveState =
  | { readonly kind: 'subscribing'; readonly reason: LiveReadReason }
  | {
      readonly kind: 'reading'
      readonly reason: LiveReadReason
      pending: Publication[]
      again: boolean
    }
  | { readonly kind: 'live' }

/** One session's stream as the loop follows it. */
export interface LiveStream {
  readonly kasmId: string
  readonly key: string
  readonly channel: string
  /** Last id handed to the listener (or where the watch started). */
  cursor: string
  readonly listener: BrokerListener<string>
  state: LiveState
}

/** Options of {@link LiveLoop}. */
export interface LiveLoopOptions {
  /** Reads streams (XRANGE); never the subscriber connection. */
  readonly command: RedisClient
  readonly channels: LiveChannels
  readonly streamKey: (kasmId: string) => string
  readonly channelOf: (kasmId: string) => string
  readonly frame: FrameFn
  readonly log: FastifyBaseLogger
  /** True while Redis is known to be away (its outage is logged elsewhere): read failures go to debug. */
  readonly quiet?: () => boolean
  /** Entries per XRANGE page. */
  readonly batch?: number
  /** Publications kept while a stream is read before the loop reads it once more instead. */
  readonly maxPending?: number
  /**
   * How often the subscriber connection is pinged while streams are followed (ms). A socket that died without
   * a close (a network partition) would otherwise hear nothing forever: no answer within the same time
   * reconnects it, and the reconnect reads every stream again.
   */
  readonly probeMs?: number
  readonly onRead?: (entries: number) => void
  readonly onStreamRead?: (reason: LiveReadReason) => void
}

/**
 * The replica's live delivery, as centrifuge does it: each append publishes its entries on the session's
 * channel, and the loop hands each publication on with no further Redis command. The stream stays the
 * record: a session joins by subscribing and then reading the stream from its cursor (so nothing appended
 * between the two is missed), a publication whose `prev` is past the cursor makes the loop read the gap, and
 * after a reconnect every channel is subscribed again and every stream read from its cursor. Each entry is
 * decoded and framed once, then handed to the session's listener (the hub), in id order, never twice.
 */
export class LiveLoop {
  readonly #o: Required<Omit<LiveLoopOptions, 'onRead' | 'onStreamRead' | 'quiet'>> &
    Pick<LiveLoopOptions, 'onRead' | 'onStreamRead' | 'quiet'>
  readonly #byChannel = new Map<string, LiveStream>()
  readonly #byKasmId = new Map<string, LiveStream>()
  readonly #probe: NodeJS.Timeout
  #probing = false
  #failing = false
  #closed = false

  constructor(options: LiveLoopOptions) {
    this.#o = { batch: 1000, maxPending: 1000, probeMs: 5000, ...options }
    this.#o.channels.onMessage((channel, payload) => this.#published(channel, payload))
    this.#o.channels.onReady(() => void this.#resubscribe())
    this.#probe = setInterval(() => void this.#checkAlive(), this.#o.probeMs)
    this.#probe.unref()
  }

  /** Number of sessions the loop follows (a metric). */
  get watchedCount(): number {
    return this.#byKasmId.size
  }

  /** Follows `kasmId`'s stream after `from` from now on, handing what it reads to `listener`. */
  watch(kasmId: string, from: string, listener: BrokerListener<string>): LiveStream {
    const w: LiveStream = {
      kasmId,
      key: this.#o.streamKey(kasmId),
      channel: this.#o.channelOf(kasmId),
      cursor: from,
      listener,
      state: { kind: 'subscribing', reason: 'join' },
    }
    this.#byKasmId.set(kasmId, w)
    this.#byChannel.set(w.channel, w)
    // Subscribed again even when a replaced watch had the channel: the confirmation starts this one's read.
    void this.#subscribe([w])
    return w
  }

  /** Stops following a stream (a later `watch` of the same session has replaced it: then nothing). */
  unwatch(w: LiveStream): void {
    if (this.#byKasmId.get(w.kasmId) !== w) return
    this.#byKasmId.delete(w.kasmId)
    this.#byChannel.delete(w.channel)
    if (this.#o.channels.ready && !this.#closed) this.#o.channels.unsubscribe([w.channel]).catch(() => {})
  }

  /** Stops everything; the caller closes the connections afterwards. */
  async close(): Promise<void> {
    this.#closed = true
    clearInterval(this.#probe)
    this.#byKasmId.clear()
    this.#byChannel.clear()
  }

  async #checkAlive(): Promise<void> {
    const { channels, probeMs } = this.#o
    if (this.#probing || !channels.ready || this.#byKasmId.size === 0) return
    this.#probing = true
    let timer: NodeJS.Timeout | undefined
    const silent = new Promise<'silent'>((resolve) => {
      timer = setTimeout(() => resolve('silent'), probeMs)
      timer.unref()
    })
    try {
      const answer = await Promise.race([channels.ping().catch(() => 'failed'), silent])
      if (answer === 'silent' && !this.#closed) {
        this.#o.log.warn('live channel connection stopped answering; reconnecting it')
        channels.reconnect()
      }
    } finally {
      clearTimeout(timer)
      this.#probing = false
    }
  }

  #current(w: LiveStream, state: LiveState): boolean {
    return !this.#closed && this.#byKasmId.get(w.kasmId) === w && w.state === state
  }

  /** Confirms the streams' channels, then reads each from its cursor. */
  async #subscribe(streams: readonly LiveStream[]): Promise<void> {
    const waiting = streams.map((w) => [w, w.state] as const)
    try {
      await this.#o.channels.subscribe(streams.map((w) => w.channel))
    } catch (err) {
      // The connection is away: its next ready subscribes every followed channel again.
      if (!this.#o.quiet?.())
        this.#o.log.debug({ err }, 'live channel subscribe failed; retried on reconnect')
      return
    }
    for (const [w, state] of waiting) {
      if (state.kind !== 'subscribing' || !this.#current(w, state)) continue
      void this.#read(w, state.reason)
    }
  }

  /** After a reconnect: every stream waits for its channel again, then is read from its cursor. */
  async #resubscribe(): Promise<void> {
    const streams = [...this.#byKasmId.values()]
    if (streams.length === 0 || this.#closed) return
    for (const w of streams) w.state = { kind: 'subscribing', reason: 'resync' }
    await this.#subscribe(streams)
  }

  /** Reads the stream from the cursor to its end, then applies what was published meanwhile; then live. */
  async #read(w: LiveStream, reason: LiveReadReason): Promise<void> {
    const state: LiveState = { kind: 'reading', reason, pending: [], again: false }
    w.state = state
    this.#o.onStreamRead?.(reason)
    const { command, batch } = this.#o
    while (this.#current(w, state)) {
      let raw: RawEntry[]
      try {
        raw = (await command.xrange(w.key, `(${w.cursor}`, '+', 'COUNT', batch)) as RawEntry[]
        this.#failing = false
      } catch (err) {
        if (!this.#current(w, state)) return
        this.#readFailed(err)
        await pause(command)
        continue
      }
      if (!this.#current(w, state)) return
      this.#deliver(w, raw)
      if (raw.length === batch || state.again) {
        state.again = false
        continue
      }
      const pending = state.pending
      state.pending = []
      if (pending.every((p) => this.#apply(w, p))) {
        w.state = { kind: 'live' }
        return
      }
    }
  }

  #readFailed(err: unknown): void {
    // Once per failure at warn, unless Redis is known to be away; retries of the same failure at debug.
    if (this.#failing || this.#o.quiet?.())
      this.#o.log.debug({ err }, 'event stream read from Redis failed again')
    else this.#o.log.warn({ err }, 'event stream read from Redis failed; retrying until it is back')
    this.#failing = true
  }

  #published(channel: string, payload: Buffer): void {
    const w = this.#byChannel.get(channel)
    if (w === undefined) return
    const state = w.state
    if (state.kind === 'subscribing') return
    const publication = parsePublication(payload)
    if (state.kind === 'reading') {
      if (publication === null || state.pending.length >= this.#o.maxPending) {
        state.pending = []
        state.again = true
      } else state.pending.push(publication)
      return
    }
    if (publication === null) {
      this.#o.log.warn({ kasmId: w.kasmId }, 'unreadable live publication; reading the stream instead')
      void this.#read(w, 'gap')
      return
    }
    if (!this.#apply(w, publication)) void this.#read(w, 'gap')
  }

  /** Hands on a publication's entries past the cursor; false (nothing handed on) when it starts past it. */
  #apply(w: LiveStream, publication: Publication): boolean {
    if (compareIds(publication.prev, w.cursor) > 0) return false
    const { entries } = publication
    let first = 0
    while (first < entries.length && compareIds((entries[first] as RawEntry)[0], w.cursor) <= 0) first++
    if (first < entries.length) this.#deliver(w, first === 0 ? entries : entries.slice(first))
    return true
  }

  #deliver(w: LiveStream, raw: readonly RawEntry[]): void {
    const last = raw.at(-1)
    if (last === undefined) return
    w.cursor = last[0]
    this.#o.onRead?.(raw.length)
    w.listener.broadcast(deliveriesOf(raw, this.#o.frame), last[0])
  }
}

/** A publication as the append script writes it (JSON `[prev, [[id, [field, value, ...]], ...]]`); null if not. */
function parsePublication(payload: Buffer): Publication | null {
  let value: unknown
  try {
    value = JSON.parse(payload.toString())
  } catch {
    return null
  }
  if (!Array.isArray(value) || value.length !== 2) return null
  const [prev, entries] = value as [unknown, unknown]
  if (typeof prev !== 'string' || !Array.isArray(entries)) return null
  for (const e of entries) {
    if (!Array.isArray(e) || typeof e[0] !== 'string' || !Array.isArray(e[1])) return null
  }
  return { prev, entries: entries as RawEntry[] }
}

/** Waits for the command connection to come back (or a short pause), without spinning. */
function pause(connection: RedisClient): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      connection.off('ready', done)
      resolve()
    }
    const timer = setTimeout(done, connection.status === 'ready' ? 100 : 1000)
    timer.unref()
    connection.once('ready', done)
  })
}
