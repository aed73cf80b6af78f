import type {
  Broker,
  BrokerDelivery,
  BrokerListener,
  BrokerSubscription,
  History,
} from '../events/broker/broker.ts'
import type { BusMessage, StreamHead, StreamPosition } from '../events/bus.ts'
import { inSpan, redisAttributes } from '../tracing/spans.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { LiveLoop } from './live-loop.ts'
import type { ClusterCommands } from './scripts.ts'
import { compareIds, deliveriesOf, encodeMessages, type FrameFn, type RawEntry } from './stream-entry.ts'

/** Options of {@link RedisBroker}. */
export interface RedisBrokerOptions {
  readonly command: RedisClient & ClusterCommands
  /** The replica's live delivery; the broker closes it. */
  readonly loop: LiveLoop
  readonly keys: ClusterKeys
  readonly frame: FrameFn
  /** Publish with SPUBLISH (sharded pub/sub, Redis Cluster) instead of PUBLISH. */
  readonly sharded: boolean
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
 * The {@link Broker} of a cluster: one Redis stream per session, written only through the fenced append
 * script, which also publishes what it added on the session's live channel; followed live by the replica's
 * {@link LiveLoop} and read back with XRANGE, so a viewer that reconnects to any replica resumes from Redis.
 * Offsets are the stream ids (`<runNo>-<seq>`).
 */
export class RedisBroker implements Broker<string> {
  readonly origin = '0-0'
  readonly #o: RedisBrokerOptions

  constructor(options: RedisBrokerOptions) {
    this.#o = options
  }

  compare(a: string, b: string): number {
    return compareIds(a, b)
  }

  async append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean> {
    const { command, keys, maxLen, maxBytes, retentionMs, onAppend, sharded } = this.#o
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
          keys.live(kasmId),
          sharded ? 'SPUBLISH' : 'PUBLISH',
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

  /** One script reads the head, the last id, the oldest entry and the first page; XRANGE pages the rest. */
  async history(kasmId: string, from: StreamPosition): Promise<History<string>> {
    const { command, keys, frame } = this.#o
    const reply = await command.krgReplay(
      keys.head(kasmId),
      keys.events(kasmId),
      from.run ?? '',
      from.after === undefined ? '' : String(from.after),
      PAGE,
    )
    if (reply.length === 1) return { run: null, oldestSeq: undefined, deliveries: [], end: reply[0] }
    const [end, run, , , oldest, firstPage] = reply
    const [first] = oldest ? deliveriesOf([oldest], frame) : []
    return {
      run,
      oldestSeq: first?.message.kind === 'event' ? first.message.seq : undefined,
      deliveries: deliveriesOf(await this.#rest(keys.events(kasmId), firstPage), frame),
      end,
    }
  }

  async since(kasmId: string, after: string, limit: number): Promise<BrokerDelivery<string>[]> {
    const raw = (await this.#o.command.xrange(
      this.#o.keys.events(kasmId),
      `(${after}`,
      '+',
      'COUNT',
      limit,
    )) as RawEntry[]
    return deliveriesOf(raw, this.#o.frame)
  }

  subscribe(kasmId: string, from: string, listener: BrokerListener<string>): BrokerSubscription<string> {
    const { loop } = this.#o
    const watched = loop.watch(kasmId, from, listener)
    return { start: from, close: () => loop.unwatch(watched) }
  }

  async drop(kasmId: string): Promise<void> {
    const { keys } = this.#o
    await this.#o.command.del(keys.events(kasmId), keys.head(kasmId), keys.sizes(kasmId))
  }

  /** Stops the live loop; the connections belong to whoever opened them. */
  async close(): Promise<void> {
    await this.#o.loop.close()
  }

  /** The history past the first page: pages of XRANGE until the stream's current end. */
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
