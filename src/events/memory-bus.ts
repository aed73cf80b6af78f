import type {
  BusMessage,
  Delivery,
  EventBus,
  ReaderLease,
  StreamHead,
  StreamPosition,
  Subscriber,
  Subscription,
} from './bus.ts'
import { storedBytes } from './bus.ts'
import { frameOf } from './sse.ts'
import { ViewerCursor } from './viewer-cursor.ts'

/** Options of {@link MemoryEventBus}. */
export interface MemoryEventBusOptions {
  /** Events kept per session for replay (the runtime keeps 4096). */
  readonly capacity: number
  /** Bytes kept per session (GATEWAY_EVENT_BUFFER_BYTES); the oldest events go first. Default: no bound. */
  readonly maxBytes?: number
  /** Bytes kept over all sessions (GATEWAY_EVENT_BUFFER_TOTAL_BYTES); the oldest events go first. */
  readonly totalBytes?: number
}

/**
 * One subscriber of a session's log: its {@link ViewerCursor}, so a live event is never delivered twice, and
 * its subscription (one object per subscriber, no closure).
 */
class LogViewer extends ViewerCursor implements Subscription {
  /**
   * Whether live messages must be checked against this cursor. Once it is caught up with the log (same run,
   * not ahead of it) everything the log appends is new to it, and checking would only cost time.
   */
  filtering = true
  readonly servedRun: string | null

  constructor(
    readonly log: SessionLog,
    readonly subscriber: Subscriber,
    run: string | undefined,
    seq: number,
  ) {
    super(run, seq)
    this.servedRun = log.run
  }

  close(): void {
    this.log.viewers.delete(this)
  }

  /** Stops filtering once nothing the log can append could be a duplicate for this subscriber. */
  settle(): void {
    if (
      this.run === undefined ||
      this.seq < 0 ||
      (this.run === this.log.run && this.seq <= this.log.lastSeq)
    ) {
      this.filtering = false
    }
  }
}

/**
 * One session: the current run's newest deliveries in a ring (at most `capacity`, at most `maxBytes`), and its
 * subscribers. Each stored delivery remembers its size and when it was stored (the bus-wide append order),
 * so the bus can evict the oldest event of the whole process when its total budget is passed.
 */
class SessionLog {
  run: string | null = null
  closed: Delivery | null = null
  lastSeq = 0
  /** Highest fence that appended here: a lower one is a stale owner. */
  fence = Number.NEGATIVE_INFINITY
  /** Bytes of the stored deliveries (see {@link storedBytes}). */
  bytes = 0
  readonly viewers = new Set<LogViewer>()
  readonly #ring: (Delivery | undefined)[]
  readonly #sizes: Float64Array
  readonly #orders: Float64Array
  #start = 0
  #count = 0

  constructor(
    readonly capacity: number,
    readonly maxBytes: number,
  ) {
    this.#ring = new Array<Delivery | undefined>(capacity)
    this.#sizes = new Float64Array(capacity)
    this.#orders = new Float64Array(capacity)
  }

  get size(): number {
    return this.#count
  }

  /** The bus-wide append order of the oldest stored delivery; Infinity when none is stored. */
  get oldestOrder(): number {
    return this.#count === 0 ? Number.POSITIVE_INFINITY : (this.#orders[this.#start] as number)
  }

  /** Seq of the oldest stored event, or undefined when none is stored. */
  get firstSeq(): number | undefined {
    if (this.#count === 0) return undefined
    return seqOf(this.#ring[this.#start])
  }

  /** Starts a run over; returns the bytes freed. */
  startRun(run: string): number {
    const freed = this.bytes
    this.run = run
    this.closed = null
    this.lastSeq = 0
    this.#ring.fill(undefined)
    this.#start = 0
    this.#count = 0
    this.bytes = 0
    return freed
  }

  /** Stores `d` (`bytes` large, appended `order`th on the bus), evicting the oldest past either bound; returns the bytes freed. */
  push(d: Delivery, bytes: number, order: number): number {
    let freed = 0
    while (this.#count > 0 && (this.#count >= this.capacity || this.bytes + bytes > this.maxBytes)) {
      freed += this.evictOldest()
    }
    const end = (this.#start + this.#count) % this.capacity
    this.#ring[end] = d
    this.#sizes[end] = bytes
    this.#orders[end] = order
    this.#count++
    this.bytes += bytes
    return freed
  }

  /** Drops the oldest stored delivery; returns its bytes. */
  evictOldest(): number {
    const at = this.#start
    const bytes = this.#sizes[at] as number
    this.#ring[at] = undefined
    this.#start = (at + 1) % this.capacity
    this.#count--
    this.bytes -= bytes
    return bytes
  }

  /** Stored deliveries with a seq above `after` (all when undefined), oldest first. */
  since(after: number | undefined): Delivery[] {
    let lo = 0
    if (after !== undefined) {
      // Seqs are strictly increasing within a run: binary search for the first one above `after`.
      let hi = this.#count
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (seqOf(this.#at(mid)) <= after) lo = mid + 1
        else hi = mid
      }
    }
    const out: Delivery[] = []
    for (let i = lo; i < this.#count; i++) out.push(this.#at(i) as Delivery)
    return out
  }

  #at(i: number): Delivery | undefined {
    return this.#ring[(this.#start + i) % this.capacity]
  }
}

function seqOf(d: Delivery | undefined): number {
  return d !== undefined && d.message.kind === 'event' ? d.message.seq : 0
}

/**
 * The {@link EventBus} of a single process: a ring buffer per session and synchronous fan-out, so a live
 * event reaches every subscriber's `deliver` in the same turn as the reader's `append`. The same batch array
 * (and the same frame buffers) go to every subscriber that needs nothing filtered.
 */
export class MemoryEventBus implements EventBus {
  readonly #capacity: number
  readonly #maxBytes: number
  readonly #totalBytes: number
  readonly #logs = new Map<string, SessionLog>()
  /** Bytes stored over every session. */
  #bytes = 0
  /** Append counter: the age of a stored delivery, compared across sessions when the total is passed. */
  #order = 0

  constructor(options: MemoryEventBusOptions) {
    this.#capacity = Math.max(1, options.capacity)
    this.#maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY
    this.#totalBytes = options.totalBytes ?? Number.POSITIVE_INFINITY
  }

  /** Sessions with a log, subscribers, stored events and bytes (tests assert bounds and that nothing leaks). */
  stats(kasmId?: string): { sessions: number; subscribers: number; stored: number; bytes: number } {
    let subscribers = 0
    let stored = 0
    let bytes = 0
    for (const [id, log] of this.#logs) {
      if (kasmId !== undefined && id !== kasmId) continue
      subscribers += log.viewers.size
      stored += log.size
      bytes += log.bytes
    }
    return { sessions: this.#logs.size, subscribers, stored, bytes }
  }

  async append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean> {
    return this.appendNow(kasmId, messages, fence)
  }

  /** {@link append} without the promise: the reader's hot path in a single process. */
  appendNow(kasmId: string, messages: readonly BusMessage[], fence: number): boolean {
    const log = this.#log(kasmId)
    if (fence < log.fence) return false
    log.fence = fence
    const fresh: Delivery[] = []
    for (const m of messages) {
      if (m.run !== log.run) {
        this.#bytes -= log.startRun(m.run)
      } else if (log.closed !== null) {
        continue // a closed trace takes nothing more
      }
      if (m.kind === 'event') {
        if (m.seq <= log.lastSeq) continue
        const d: Delivery = { message: m, frame: frameOf(m) }
        const bytes = storedBytes(d)
        this.#bytes += bytes - log.push(d, bytes, this.#order++)
        log.lastSeq = m.seq
        fresh.push(d)
      } else {
        const d: Delivery = { message: m, frame: frameOf(m) }
        log.closed = d
        fresh.push(d)
      }
    }
    if (this.#bytes > this.#totalBytes) this.#evictOverall()
    if (fresh.length > 0) {
      for (const viewer of log.viewers) {
        if (!viewer.filtering) {
          viewer.subscriber.deliver(fresh, false)
          continue
        }
        const batch = viewer.admitAll(fresh)
        viewer.settle()
        if (batch.length > 0) viewer.subscriber.deliver(batch, false)
      }
    }
    return true
  }

  async head(kasmId: string): Promise<StreamHead | null> {
    const log = this.#logs.get(kasmId)
    if (log === undefined || log.run === null) return null
    return { run: log.run, seq: log.lastSeq, closed: log.closed !== null }
  }

  async subscribe(kasmId: string, from: StreamPosition, subscriber: Subscriber): Promise<Subscription> {
    const log = this.#log(kasmId)
    const sameRun = from.run !== undefined && from.run === log.run && from.after !== undefined
    let viewer: LogViewer
    let replay: Delivery[]
    if (log.run === null) {
      // Nothing stored yet: remember the position so a reader that restarts behind it causes no duplicate.
      viewer = new LogViewer(log, subscriber, from.run, from.after ?? -1)
      replay = []
    } else if (sameRun) {
      const after = from.after as number
      const first = log.firstSeq
      if (first !== undefined && first > after + 1) subscriber.gap?.(after + 1, first - 1)
      viewer = new LogViewer(log, subscriber, log.run, after)
      replay = log.since(after)
    } else {
      viewer = new LogViewer(log, subscriber, log.run, -1)
      replay = log.since(undefined)
    }
    if (log.closed !== null) replay.push(log.closed)
    const batch = viewer.admitAll(replay)
    viewer.settle()
    log.viewers.add(viewer)
    if (batch.length > 0) subscriber.deliver(batch, true)
    return viewer
  }

  async drop(kasmId: string): Promise<void> {
    // Subscribers still attached keep the old log until they close; nothing is appended to it any more.
    const log = this.#logs.get(kasmId)
    if (log !== undefined) this.#bytes -= log.bytes
    this.#logs.delete(kasmId)
  }

  async close(): Promise<void> {
    this.#logs.clear()
    this.#bytes = 0
  }

  /**
   * The process is over its total budget: evict the oldest stored events of any session until it is not
   * (each eviction looks at every session's oldest event; it only runs near the budget).
   */
  #evictOverall(): void {
    while (this.#bytes > this.#totalBytes) {
      let oldest: SessionLog | undefined
      for (const log of this.#logs.values()) {
        if (log.oldestOrder < (oldest?.oldestOrder ?? Number.POSITIVE_INFINITY)) oldest = log
      }
      if (oldest === undefined) return
      this.#bytes -= oldest.evictOldest()
    }
  }

  #log(kasmId: string): SessionLog {
    let log = this.#logs.get(kasmId)
    if (log === undefined) {
      log = new SessionLog(this.#capacity, this.#maxBytes)
      this.#logs.set(kasmId, log)
    }
    return log
  }
}

/**
 * The {@link ReaderLease} of a single process: every acquire succeeds with a higher fence, so a reader that
 * was replaced (restart after token rotation) can no longer append.
 */
export class MemoryReaderLease implements ReaderLease {
  #next = 1
  readonly #held = new Map<string, number>()

  async acquire(kasmId: string): Promise<number> {
    const fence = this.#next++
    this.#held.set(kasmId, fence)
    return fence
  }

  async renew(kasmId: string, fence: number): Promise<boolean> {
    return this.#held.get(kasmId) === fence
  }

  async release(kasmId: string, fence: number): Promise<void> {
    if (this.#held.get(kasmId) === fence) this.#held.delete(kasmId)
  }
}
