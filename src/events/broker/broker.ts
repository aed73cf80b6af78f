/**
 * The storage half of the event path (centrifuge's broker): a session's log of events, appended by its one
 * reader and read back from a position, plus one live subscription per session for the whole replica. It
 * knows nothing of viewers: `events/hub.ts` keeps those, and what each one still needs.
 */

import type { BusMessage, Delivery, StreamHead, StreamPosition } from '../bus.ts'

/**
 * A stored delivery with its place in the broker's log. Offsets only rise (also across runs, and after the
 * store lost its data), so the hub can tell a replay and a live batch apart where they overlap.
 */
export type BrokerDelivery<P> = Delivery & { readonly offset: P }

/** What {@link Broker.history} read: a consistent snapshot of a session's log. */
export interface History<P> {
  /** The stored run; null when nothing is stored for the session. */
  readonly run: string | null
  /** Seq of the oldest stored event of that run; undefined when none is stored. */
  readonly oldestSeq: number | undefined
  /**
   * The stored deliveries: those above `from.after` when `from.run` names the stored run and `after` is
   * given, every stored one otherwise; a closed run's `closed` last.
   */
  readonly deliveries: readonly BrokerDelivery<P>[]
  /** The log's end when the snapshot was taken: a subscription from here misses nothing after it. */
  readonly end: P
}

/** Where a session's live deliveries go: the hub, once per replica and session. */
export interface BrokerListener<P> {
  /**
   * A batch read from the log, in order, every offset above the previous batch's `end`. `end` is the last
   * offset read (also when none of it decoded into a delivery, leaving `batch` empty).
   */
  broadcast(batch: readonly BrokerDelivery<P>[], end: P): void
}

/** A session's live subscription; `close` stops it. */
export interface BrokerSubscription<P> {
  /**
   * Where delivery starts: deliveries above it reach the listener. The `from` asked for, or later for a
   * broker that delivers in the append itself (it has no read position to start behind).
   */
  readonly start: P
  close(): void
}

/** A session's event log (in memory, or one Redis stream per session). */
export interface Broker<P> {
  /** The offset below every stored one (a viewer that has had nothing). */
  readonly origin: P
  /** Orders two offsets (negative, zero, positive). */
  compare(a: P, b: P): number
  /**
   * Appends what the reader read. `fence` is the reader's lease token: an append with a stale fence is
   * refused (returns false) so a paused old owner can never write after a new one took over. Events whose
   * `seq` is already stored for that run are dropped, never stored twice. An event of another run than the
   * stored one starts that run over.
   */
  append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean>
  /** The last stored position, where a (new) reader resumes with `after=&run=`; null when nothing is stored. */
  head(kasmId: string): Promise<StreamHead | null>
  /** What is stored from `from` on (see {@link History.deliveries}). */
  history(kasmId: string, from: StreamPosition): Promise<History<P>>
  /** At most `limit` stored deliveries above `after`, oldest first (a joining viewer catching up). */
  since(kasmId: string, after: P, limit: number): Promise<BrokerDelivery<P>[]>
  /** Starts the replica's one live subscription to a session, from `from` (see {@link BrokerSubscription}). */
  subscribe(kasmId: string, from: P, listener: BrokerListener<P>): BrokerSubscription<P>
  /** Forgets a session's stored events (the session was removed). */
  drop(kasmId: string): Promise<void>
  /** Frees everything (buffers, the read loop). */
  close(): Promise<void>
}
