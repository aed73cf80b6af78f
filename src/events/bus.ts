/**
 * The seam between the one upstream reader of a session and its many viewers. One implementation,
 * `events/hub-bus.ts`: a broker (`events/broker/`, in memory or Redis) for the log, and the replica's hub
 * (`events/hub.ts`) for the viewers. Everything else in `events/` talks to this.
 */

import type { StreamMessage } from '../protocol/events.ts'
import type { PreparedBatch } from './prepared-batch.ts'

/** One item of a session's event stream, as read from the runtime (the protocol's shape). */
export type BusMessage = StreamMessage

/** A message with its SSE frame, serialised once per event (never once per viewer). */
export interface Delivery {
  readonly message: BusMessage
  readonly frame: Buffer
}

/**
 * What keeping a delivery costs: its frame plus its payload string (kept for subscribers that read it, e.g. a
 * summary), counted as one byte per character as V8 stores the runtime's mostly-ASCII JSON.
 */
export function storedBytes(d: Delivery): number {
  return d.frame.length + (d.message.kind === 'event' ? d.message.data.length : 0)
}

/** Where a viewer wants to start: the spec's `after=<seq>&run=<run_id>` or `Last-Event-ID: <run>:<seq>`. */
export interface StreamPosition {
  readonly run?: string
  readonly after?: number
}

/**
 * What the bus holds for a session: the current run and the last stored sequence number (0 when the run is
 * known, e.g. from a `closed`, but none of its events is stored; runtime sequence numbers start at 1).
 */
export interface StreamHead {
  readonly run: string
  readonly seq: number
  readonly closed: boolean
}

/** A live subscription; `close` frees everything it holds. */
export interface Subscription {
  /**
   * The run the bus served when the subscription started (null: nothing known yet), so a stream can open with
   * its `: run <id>` line even when nothing is to be replayed.
   */
  readonly servedRun: string | null
  close(): void
}

/** Callbacks of a subscriber. Deliveries arrive in order, once each, replay first. */
export interface Subscriber {
  /**
   * Called with one or more deliveries; a batch lets the viewer write once per event-loop turn. `replay` is
   * true for stored events handed out by `subscribe` (the bus holds those bytes anyway, so a viewer does not
   * count them against its queued-bytes bound) and false for live ones. `prepared` describes `batch` (its
   * `deliveries`); the same batch array and the same `prepared` go to every subscriber that needs all of a
   * broadcast: treat both as read-only.
   */
  deliver(batch: readonly Delivery[], replay: boolean, prepared: PreparedBatch): void
  /**
   * The replay could not be served whole (the run's events `from`..`to` are no longer stored). Called before
   * the first `deliver`; the subscriber fills the gap from the trace or shows it.
   */
  gap?(from: number, to: number): void
  /**
   * The run the bus serves, once, when the subscription started before it was known (`servedRun` null) and
   * the first events read of it were all behind the subscriber's position (`after=<current seq>&run=` on a
   * session nobody read yet): a stream opens with `: run <id>` as soon as the run is known. A subscriber
   * handed events learns their run from them instead.
   */
  served?(run: string): void
}

/** Fan-out of one session's events to every subscriber, with replay from a buffer. */
export interface EventBus {
  /**
   * Appends what the reader read. `fence` is the reader's lease token: an append with a stale fence is
   * refused (returns false) so a paused old owner can never write after a new one took over. Events whose
   * `seq` is already stored for that run are dropped, never stored twice. An event of another run than the
   * stored one starts that run over (the buffer is emptied first).
   */
  append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean>
  /** The last stored position, where a (new) reader resumes with `after=&run=`; null when nothing is stored. */
  head(kasmId: string): Promise<StreamHead | null>
  /**
   * Replays from `from` (the spec's rules), then delivers live messages, without gap or duplicate:
   * - `from.run` names the stored run: the stored events with a seq above `from.after` (if the oldest stored
   *   one is more than one above it, `gap` first); later live events of that run at or below `from.after`
   *   are never delivered;
   * - otherwise every stored event of the current run, from the oldest;
   * - a closed run ends the replay with its `closed` delivery.
   */
  subscribe(kasmId: string, from: StreamPosition, subscriber: Subscriber): Promise<Subscription>
  /** Forgets a session's stored events (the session was removed); optional where stored events expire. */
  drop?(kasmId: string): Promise<void>
  /** Frees everything (connections, buffers). */
  close(): Promise<void>
}

/**
 * Who reads a session's upstream stream. In memory every acquire succeeds; in Redis it is a lease
 * (`SET NX PX`, renewed) whose fencing token increases with every new owner.
 */
export interface ReaderLease {
  /** Tries to become the session's one reader; returns a fencing token, or null when another owner holds it. */
  acquire(kasmId: string): Promise<number | null>
  /** Extends the lease; false when it was lost (stop reading at once). */
  renew(kasmId: string, fence: number): Promise<boolean>
  /** Gives the lease up at once (shutdown, last viewer gone) so another replica need not wait for expiry. */
  release(kasmId: string, fence: number): Promise<void>
}
