import type { Broker, BrokerDelivery, BrokerListener, BrokerSubscription } from './broker/broker.ts'
import type { Delivery, StreamPosition, Subscriber, Subscription } from './bus.ts'
import { type HubMessage, hubChannel } from './diagnostics.ts'
import { PreparedBatch } from './prepared-batch.ts'
import { ViewerCursor } from './viewer-cursor.ts'

/** Deliveries fetched per round while a joining viewer catches up with the live subscription. */
const CATCH_UP_PAGE = 1000

/** Rounds of catching up after which a viewer that never gets there joins where the subscription is. */
const CATCH_UP_ROUNDS = 100

/**
 * One viewer of a session: what it has had, by broker offset (a replay and a live batch may overlap) and by
 * the {@link ViewerCursor} rule on (run, seq), which also catches a run re-appended after the store lost it.
 * While `inStep` its state is the session's (see {@link HubSession.stepped}) and its own fields are unused.
 */
class HubViewer<P> extends ViewerCursor implements Subscription {
  readonly session: HubSession<P>
  readonly subscriber: Subscriber
  readonly servedRun: string | null
  offset: P
  inStep = false
  /** The subscriber knows the run the bus serves (its `servedRun`, or a batch read since). */
  knowsRun: boolean

  constructor(session: HubSession<P>, subscriber: Subscriber, servedRun: string | null) {
    super()
    this.session = session
    this.subscriber = subscriber
    this.servedRun = servedRun
    this.knowsRun = servedRun !== null
    this.offset = session.broker.origin
  }

  close(): void {
    this.session.leave(this)
  }

  /** Seeds the (run, seq) rule from the viewer's position. */
  startAt(run: string, seq: number): void {
    this.run = run
    this.seq = seq
  }

  /** Hands the viewer what of `batch` it has not had yet. */
  offer(batch: readonly BrokerDelivery<P>[], replay: boolean): void {
    const own = this.admitAll(batch)
    if (own.length > 0) this.subscriber.deliver(own, replay, new PreparedBatch(own))
    if (!this.knowsRun) this.learnRun(batch, own.length > 0)
  }

  /**
   * The first batch read since the viewer joined knowing no run: the run is known now. When nothing of it
   * was new to the viewer (its position was past it), it is told the run alone.
   */
  learnRun(batch: readonly BrokerDelivery<P>[], delivered: boolean): void {
    const last = batch[batch.length - 1]
    if (last === undefined) return
    this.knowsRun = true
    if (!delivered) this.subscriber.served?.(last.message.run)
  }

  protected override admits(d: Delivery): boolean {
    const offset = (d as BrokerDelivery<P>).offset
    if (this.session.broker.compare(offset, this.offset) <= 0) return false
    this.offset = offset
    return this.admit(d.message)
  }
}

/** A session watched on this replica: its viewers and the replica's one broker subscription to it. */
class HubSession<P> implements BrokerListener<P> {
  readonly hub: Hub<P>
  readonly broker: Broker<P>
  readonly kasmId: string
  readonly viewers = new Set<HubViewer<P>>()
  /** Viewers whose join is in flight: the session stays watched while they catch up. */
  pending = 0
  subscription: BrokerSubscription<P> | null = null
  /** The last offset the subscription delivered (or its start). */
  cursor: P
  /**
   * The state of every viewer in step: a viewer whose cursor is in step with this one
   * ({@link ViewerCursor.inStepWith}) and not ahead of {@link cursor} admits what this admits, so each batch
   * is filtered and prepared once for all of them.
   */
  readonly stepped = new ViewerCursor()

  constructor(hub: Hub<P>, broker: Broker<P>, kasmId: string) {
    this.hub = hub
    this.broker = broker
    this.kasmId = kasmId
    this.cursor = broker.origin
  }

  broadcast(batch: readonly BrokerDelivery<P>[], end: P): void {
    this.cursor = end
    if (batch.length === 0) return
    if (hubChannel.hasSubscribers)
      hubChannel.publish({ kasmId: this.kasmId, deliveries: batch } satisfies HubMessage)
    const shared = this.stepped.admitAll(batch)
    const prepared = new PreparedBatch(shared)
    for (const viewer of this.viewers) {
      if (viewer.inStep) {
        if (shared.length > 0) viewer.subscriber.deliver(shared, false, prepared)
        if (!viewer.knowsRun) viewer.learnRun(batch, shared.length > 0)
        continue
      }
      const own = viewer.admitAll(batch)
      if (own.length > 0)
        viewer.subscriber.deliver(own, false, own === shared ? prepared : new PreparedBatch(own))
      if (!viewer.knowsRun) viewer.learnRun(batch, own.length > 0)
      viewer.inStep = viewer.inStepWith(this.stepped) && this.broker.compare(viewer.offset, end) <= 0
    }
  }

  leave(viewer: HubViewer<P>): void {
    this.viewers.delete(viewer)
    this.hub.forget(this)
  }
}

/**
 * The viewers of this replica (centrifuge's hub), over a {@link Broker}: per watched session, the set of
 * viewers and one broker subscription, however many viewers. It holds the no-gap, no-duplicate rule for both
 * brokers: a joining viewer gets the history from its position, then catches up with the live subscription
 * before it is added, and every live batch is filtered and prepared once for all the viewers in step.
 */
export class Hub<P> {
  readonly #broker: Broker<P>
  readonly #sessions = new Map<string, HubSession<P>>()
  #closed = false

  constructor(broker: Broker<P>) {
    this.#broker = broker
  }

  /** Viewers of one session, or of all (tests assert that nothing leaks). */
  viewerCount(kasmId?: string): number {
    if (kasmId !== undefined) return this.#sessions.get(kasmId)?.viewers.size ?? 0
    let n = 0
    for (const s of this.#sessions.values()) n += s.viewers.size
    return n
  }

  /**
   * Replays from `from` (the spec's rules), then delivers live batches, without gap or duplicate:
   * - `from.run` names the stored run: the stored events with a seq above `from.after` (if the oldest stored
   *   one is more than one above it, `gap` first); later live events of that run at or below `from.after`
   *   are never delivered;
   * - otherwise every stored event of the current run, from the oldest;
   * - a closed run ends the replay with its `closed` delivery.
   */
  async join(kasmId: string, from: StreamPosition, subscriber: Subscriber): Promise<Subscription> {
    const after =
      from.after !== undefined && Number.isSafeInteger(from.after) && from.after >= 0 ? from.after : undefined
    const session = this.#session(kasmId)
    session.pending++
    try {
      const history = await this.#broker.history(kasmId, { run: from.run, after })
      const viewer = new HubViewer(session, subscriber, history.run)
      if (history.run === null) {
        // Nothing stored yet: remember the viewer's place so a reader restarting behind it adds no duplicate.
        if (from.run !== undefined) viewer.startAt(from.run, after ?? -1)
      } else if (from.run === history.run && after !== undefined) {
        viewer.startAt(history.run, after)
        const oldest = history.oldestSeq
        if (oldest !== undefined && oldest > after + 1) subscriber.gap?.(after + 1, oldest - 1)
      }
      viewer.offer(history.deliveries, true)
      if (this.#broker.compare(history.end, viewer.offset) > 0) viewer.offset = history.end
      await this.#catchUp(session, viewer)
      return viewer
    } finally {
      session.pending--
      this.forget(session)
    }
  }

  /** Lets a session go once nothing on this replica watches it. */
  forget(session: HubSession<P>): void {
    if (session.viewers.size > 0 || session.pending > 0) return
    if (this.#sessions.get(session.kasmId) !== session) return
    session.subscription?.close()
    this.#sessions.delete(session.kasmId)
  }

  /** Stops every subscription; viewers get nothing more. */
  close(): void {
    this.#closed = true
    for (const session of this.#sessions.values()) {
      session.viewers.clear()
      session.subscription?.close()
    }
    this.#sessions.clear()
  }

  /**
   * Adds a viewer whose history ended at `viewer.offset` once it is where the live subscription is. If the
   * subscription already delivered past that point, what lies in between is fetched and offered first, so
   * nothing the other viewers got is skipped.
   */
  async #catchUp(session: HubSession<P>, viewer: HubViewer<P>): Promise<void> {
    const broker = this.#broker
    for (let round = 0; !this.#closed; round++) {
      if (session.subscription === null) {
        session.subscription = broker.subscribe(session.kasmId, viewer.offset, session)
        session.cursor = session.subscription.start
      }
      if (broker.compare(viewer.offset, session.cursor) >= 0) {
        viewer.inStep =
          viewer.inStepWith(session.stepped) && broker.compare(viewer.offset, session.cursor) === 0
        session.viewers.add(viewer)
        return
      }
      // Where the subscription was when the fetch went out: the store runs the fetch after that, so an empty
      // answer means nothing is stored between the viewer and this point. The subscription may deliver
      // further while the answer is on its way (two connections, no order between their replies): what it
      // delivered meanwhile is fetched by the next round, never skipped by jumping to where it is now.
      const sent = session.cursor
      const missed = await broker.since(session.kasmId, viewer.offset, CATCH_UP_PAGE)
      if (missed.length === 0) {
        // Nothing between (trimmed, or the store lost it): continue from the cursor at the fetch.
        viewer.offset = sent
        continue
      }
      if (round > CATCH_UP_ROUNDS) {
        // A viewer that never catches up (the log grows faster than it pages): join where the cursor is.
        viewer.offset = session.cursor
        continue
      }
      viewer.offer(missed, true)
    }
  }

  #session(kasmId: string): HubSession<P> {
    let session = this.#sessions.get(kasmId)
    if (session === undefined) {
      session = new HubSession(this, this.#broker, kasmId)
      this.#sessions.set(kasmId, session)
    }
    return session
  }
}
