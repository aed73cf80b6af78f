import type { BusMessage, StreamHead, StreamPosition } from '../bus.ts'
import { storedBytes } from '../bus.ts'
import { frameOf } from '../sse.ts'
import type { Broker, BrokerDelivery, BrokerListener, BrokerSubscription, History } from './broker.ts'

/** Options of {@link MemoryBroker}. */
export interface MemoryBrokerOptions {
  /** Events kept per session for replay (the runtime keeps 4096). */
  readonly capacity: number
  /** Bytes kept per session (GATEWAY_EVENT_BUFFER_BYTES); the oldest events go first. Default: no bound. */
  readonly maxBytes?: number
  /** Bytes kept over all sessions (GATEWAY_EVENT_BUFFER_TOTAL_BYTES); the oldest events go first. */
  readonly totalBytes?: number
}

type Stored = BrokerDelivery<number>

/**
 * One session: the current run's newest deliveries in a ring (at most `capacity`, at most `maxBytes`). Each
 * stored delivery remembers its size; its offset is the broker-wide append order, so the broker can also
 * evict the oldest event of the whole process when its total budget is passed.
 */
class SessionLog {
  readonly capacity: number
  readonly maxBytes: number
  run: string | null = null
  closed: Stored | null = null
  lastSeq = 0
  /** Highest fence that appended here: a lower one is a stale owner. */
  fence = Number.NEGATIVE_INFINITY
  /** Bytes of the stored deliveries (see {@link storedBytes}). */
  bytes = 0
  readonly #ring: (Stored | undefined)[]
  readonly #sizes: Float64Array
  #start = 0
  #count = 0

  constructor(capacity: number, maxBytes: number) {
    this.capacity = capacity
    this.maxBytes = maxBytes
    this.#ring = new Array<Stored | undefined>(capacity)
    this.#sizes = new Float64Array(capacity)
  }

  get size(): number {
    return this.#count
  }

  /** The offset of the oldest stored delivery; Infinity when none is stored. */
  get oldestOffset(): number {
    return this.#count === 0 ? Number.POSITIVE_INFINITY : (this.#at(0) as Stored).offset
  }

  /** Seq of the oldest stored event, or undefined when none is stored. */
  get firstSeq(): number | undefined {
    if (this.#count === 0) return undefined
    return seqOf(this.#at(0))
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

  /** Stores `d` (`bytes` large), evicting the oldest past either bound; returns the bytes freed. */
  push(d: Stored, bytes: number): number {
    let freed = 0
    while (this.#count > 0 && (this.#count >= this.capacity || this.bytes + bytes > this.maxBytes)) {
      freed += this.evictOldest()
    }
    const end = (this.#start + this.#count) % this.capacity
    this.#ring[end] = d
    this.#sizes[end] = bytes
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

  /** At most `limit` stored events whose `key` is above `after` (all when undefined), oldest first. */
  above(key: (d: Stored | undefined) => number, after: number | undefined, limit: number): Stored[] {
    let lo = 0
    if (after !== undefined) {
      // Seqs and offsets are strictly increasing within a run: binary search for the first one above `after`.
      let hi = this.#count
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (key(this.#at(mid)) <= after) lo = mid + 1
        else hi = mid
      }
    }
    const out: Stored[] = []
    for (let i = lo; i < this.#count && out.length < limit; i++) out.push(this.#at(i) as Stored)
    return out
  }

  #at(i: number): Stored | undefined {
    return this.#ring[(this.#start + i) % this.capacity]
  }
}

function seqOf(d: Stored | undefined): number {
  return d !== undefined && d.message.kind === 'event' ? d.message.seq : 0
}

function offsetOf(d: Stored | undefined): number {
  return d?.offset ?? 0
}

/**
 * The {@link Broker} of a single process: a ring buffer per session, and live delivery inside `append`, so
 * a live event reaches the hub in the same turn as the reader's append.
 */
export class MemoryBroker implements Broker<number> {
  readonly origin = 0
  readonly #capacity: number
  readonly #maxBytes: number
  readonly #totalBytes: number
  readonly #logs = new Map<string, SessionLog>()
  readonly #listeners = new Map<string, BrokerListener<number>>()
  /** Bytes stored over every session. */
  #bytes = 0
  /** The last offset given: the append order over all sessions, compared when the total is passed. */
  #offset = 0

  constructor(options: MemoryBrokerOptions) {
    this.#capacity = Math.max(1, options.capacity)
    this.#maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY
    this.#totalBytes = options.totalBytes ?? Number.POSITIVE_INFINITY
  }

  compare(a: number, b: number): number {
    return a - b
  }

  /** Sessions with a log, stored events and bytes (tests assert bounds and that nothing leaks). */
  stats(kasmId?: string): { sessions: number; stored: number; bytes: number } {
    let stored = 0
    let bytes = 0
    for (const [id, log] of this.#logs) {
      if (kasmId !== undefined && id !== kasmId) continue
      stored += log.size
      bytes += log.bytes
    }
    return { sessions: this.#logs.size, stored, bytes }
  }

  async append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean> {
    return this.appendNow(kasmId, messages, fence)
  }

  /** {@link append} without the promise: the reader's hot path in a single process. */
  appendNow(kasmId: string, messages: readonly BusMessage[], fence: number): boolean {
    const log = this.#log(kasmId)
    if (fence < log.fence) return false
    log.fence = fence
    const fresh: Stored[] = []
    for (const m of messages) {
      if (m.run !== log.run) {
        this.#bytes -= log.startRun(m.run)
      } else if (log.closed !== null) {
        continue // a closed trace takes nothing more
      }
      if (m.kind === 'event') {
        if (m.seq <= log.lastSeq) continue
        const d: Stored = { message: m, frame: frameOf(m), offset: ++this.#offset }
        const bytes = storedBytes(d)
        this.#bytes += bytes - log.push(d, bytes)
        log.lastSeq = m.seq
        fresh.push(d)
      } else {
        const d: Stored = { message: m, frame: frameOf(m), offset: ++this.#offset }
        log.closed = d
        fresh.push(d)
      }
    }
    if (this.#bytes > this.#totalBytes) this.#evictOverall()
    if (fresh.length > 0) this.#listeners.get(kasmId)?.broadcast(fresh, this.#offset)
    return true
  }

  async head(kasmId: string): Promise<StreamHead | null> {
    const log = this.#logs.get(kasmId)
    if (log === undefined || log.run === null) return null
    return { run: log.run, seq: log.lastSeq, closed: log.closed !== null }
  }

  async history(kasmId: string, from: StreamPosition): Promise<History<number>> {
    const log = this.#log(kasmId)
    if (log.run === null) return { run: null, oldestSeq: undefined, deliveries: [], end: this.#offset }
    const after = from.run === log.run ? from.after : undefined
    const deliveries = log.above(seqOf, after, Number.POSITIVE_INFINITY)
    if (log.closed !== null) deliveries.push(log.closed)
    return { run: log.run, oldestSeq: log.firstSeq, deliveries, end: this.#offset }
  }

  async since(kasmId: string, after: number, limit: number): Promise<Stored[]> {
    const log = this.#logs.get(kasmId)
    if (log === undefined) return []
    const out = log.above(offsetOf, after, limit)
    if (log.closed !== null && log.closed.offset > after && out.length < limit) out.push(log.closed)
    return out
  }

  /** Delivery happens in `append`: it starts at the newest offset, whatever `from` says. */
  subscribe(kasmId: string, _from: number, listener: BrokerListener<number>): BrokerSubscription<number> {
    this.#log(kasmId)
    this.#listeners.set(kasmId, listener)
    return {
      start: this.#offset,
      close: () => {
        if (this.#listeners.get(kasmId) === listener) this.#listeners.delete(kasmId)
      },
    }
  }

  async drop(kasmId: string): Promise<void> {
    const log = this.#logs.get(kasmId)
    if (log !== undefined) this.#bytes -= log.bytes
    this.#logs.delete(kasmId)
  }

  async close(): Promise<void> {
    this.#logs.clear()
    this.#listeners.clear()
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
        if (log.oldestOffset < (oldest?.oldestOffset ?? Number.POSITIVE_INFINITY)) oldest = log
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
