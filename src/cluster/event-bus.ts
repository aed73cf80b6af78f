import type { Redis } from 'ioredis'
import type {
  BusMessage,
  Delivery,
  EventBus,
  StreamHead,
  StreamPosition,
  Subscriber,
  Subscription,
} from '../events/bus.ts'
import { frameOf } from '../events/sse.ts'
import { inSpan, redisAttributes } from '../tracing/spans.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'
import { compareIds, decodeEntry, encodeMessages, type RawEntry } from './stream-entry.ts'
import { type StreamFanout, StreamViewer } from './stream-fanout.ts'

/** Options of {@link RedisEventBus}. */
export interface RedisEventBusOptions {
  readonly command: Redis & ClusterCommands
  readonly fanout: StreamFanout
  readonly keys: ClusterKeys
  /** Entries kept per session stream, GATEWAY_EVENT_BUFFER. */
  readonly maxLen: number
  /** Bytes kept per session stream, GATEWAY_EVENT_BUFFER_BYTES (payloads plus a small overhead per entry). */
  readonly maxBytes?: number
  /** How long an idle session's stream and head outlive their last append (ms). */
  readonly retentionMs: number
  /** Called with each append's outcome (metrics). */
  readonly onAppend?: (result: 'stored' | 'fenced' | 'error', entries: number) => void
}

const PAGE = 1000

/**
 * The {@link EventBus} of a cluster: one Redis stream per session, written only through the fenced append
 * script, read live by the replica's single XREAD loop ({@link StreamFanout}) and replayed with XRANGE, so a
 * viewer that reconnects to any replica resumes from Redis without gap or duplicate.
 */
export class RedisEventBus implements EventBus {
  readonly #o: RedisEventBusOptions

  constructor(options: RedisEventBusOptions) {
    this.#o = options
  }

  async append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean> {
    const { command, keys, maxLen, maxBytes, retentionMs, onAppend } = this.#o
    let added: number
    try {
      const attributes = redisAttributes('krgAppend', {
        'krg.kasm_id': kasmId,
        'krg.messages': messages.length,
      })
      added = await inSpan('redis events append', attributes, () =>
        command.krgAppend(
          keys.lease(kasmId),
          keys.head(kasmId),
          keys.events(kasmId),
          keys.sizes(kasmId),
          String(fence),
          maxLen,
          retentionMs,
          Date.now(),
          maxBytes ?? Number.MAX_SAFE_INTEGER,
          ...encodeMessages(messages),
        ),
      )
    } catch (err) {
      onAppend?.('error', 0)
      throw err
    }
    if (added < 0) {
      onAppend?.('fenced', 0)
      return false
    }
    onAppend?.('stored', added)
    return true
  }

  async head(kasmId: string): Promise<StreamHead | null> {
    const [run, seq, closed] = await this.#o.command.hmget(this.#o.keys.head(kasmId), 'run', 'seq', 'closed')
    if (!run) return null
    return { run, seq: Math.max(0, Number(seq ?? 0)), closed: closed === '1' }
  }

  async subscribe(kasmId: string, from: StreamPosition, subscriber: Subscriber): Promise<Subscription> {
    const { command, keys, fanout } = this.#o
    const position = new StreamViewer(subscriber)
    const after =
      from.after !== undefined && Number.isSafeInteger(from.after) && from.after >= 0 ? from.after : undefined
    fanout.reserve(kasmId)
    let joined: Promise<void> | undefined
    let servedRun: string | null = null
    try {
      const reply = await command.krgReplay(
        keys.head(kasmId),
        keys.events(kasmId),
        from.run ?? '',
        after === undefined ? '' : String(after),
        PAGE,
      )
      if (reply.length === 1) {
        // Nothing stored yet: remember the viewer's place so a reader restarting behind it adds no duplicate.
        if (from.run !== undefined) position.startAfter(from.run, after ?? -1)
      } else {
        const [, run, , , oldest, firstPage] = reply
        servedRun = run
        const sameRun = from.run === run && after !== undefined
        if (sameRun) {
          position.startAfter(run, after)
          const oldestSeq = oldest ? seqOf(oldest) : undefined
          if (oldestSeq !== undefined && oldestSeq > after + 1) subscriber.gap?.(after + 1, oldestSeq - 1)
        }
        const entries = await this.#rest(keys.events(kasmId), firstPage)
        const replay: Delivery[] = []
        for (const raw of entries) {
          const decoded = decodeEntry(raw)
          if (decoded && position.take(decoded.id, decoded.message)) {
            replay.push({ message: decoded.message, frame: frameOf(decoded.message) })
          }
        }
        if (replay.length > 0) subscriber.deliver(replay, true)
      }
      // Join the live loop where the snapshot ended (or later, if the replay's pages ran past it).
      if (compareIds(reply[0], position.lastId) > 0) position.lastId = reply[0]
      joined = fanout.join(kasmId, position)
    } finally {
      if (joined === undefined) fanout.join(kasmId, cancelled(position)).catch(() => {})
    }
    await joined
    return { servedRun, close: () => fanout.leave(kasmId, position) }
  }

  async drop(kasmId: string): Promise<void> {
    const { keys } = this.#o
    await this.#o.command.del(keys.events(kasmId), keys.head(kasmId), keys.sizes(kasmId))
  }

  /** The fan-out loop and the connections belong to the cluster plugin, which closes them. */
  async close(): Promise<void> {}

  /** The replay past the first page: pages of XRANGE until the stream's current end. */
  async #rest(key: string, firstPage: RawEntry[]): Promise<RawEntry[]> {
    let entries = firstPage
    let page = firstPage
    while (page.length === PAGE) {
      const last = page.at(-1) as RawEntry
      page = (await this.#o.command.xrange(key, `(${last[0]}`, '+', 'COUNT', PAGE)) as RawEntry[]
      entries = entries.concat(page)
    }
    return entries
  }
}

function seqOf(raw: RawEntry): number | undefined {
  const decoded = decodeEntry(raw)
  return decoded?.message.kind === 'event' ? decoded.message.seq : undefined
}

/** Marks a position inactive so `join` only gives back the reservation. */
function cancelled(position: StreamViewer): StreamViewer {
  position.active = false
  return position
}
