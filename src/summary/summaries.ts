import type { FastifyBaseLogger } from 'fastify'
import type { Delivery, EventBus, Subscriber, Subscription } from '../events/bus.ts'
import type { ReaderHealth } from '../events/upstream-reader.ts'
import type { SessionBoard } from './board.ts'
import { SummaryFold } from './fold.ts'
import type { SessionSummary, Transition, UpstreamHealth } from './types.ts'

/** A session's summary as handed to every listener: built once per change, shared, never mutated. */
export interface SummaryPublication {
  readonly kasmId: string
  readonly summary: SessionSummary
  readonly health: UpstreamHealth
}

/** Who gets a session's publications and transitions. */
export interface SummaryListener {
  /** The session's summary changed (also once at the start, with what is known). */
  summary(publication: SummaryPublication): void
  /**
   * Something changed for people. `replay` is true for transitions folded from stored events when the watch
   * began (they happened before: a notifier would dedupe them by run and seq rather than send them again).
   */
  transition?(kasmId: string, transition: Transition, replay: boolean): void
}

/** Hears a transition of any session summarised on this replica (see {@link SessionSummaries.onTransition}). */
export type TransitionTap = (kasmId: string, transition: Transition, replay: boolean) => void

/** What {@link SessionSummaries} works with. */
export interface SessionSummariesOptions {
  readonly bus: EventBus
  /** Keeps the session's upstream stream read while a summary is watched (SessionStreams.retain). */
  readonly retain: (kasmId: string) => () => void
  /** Where readers report health and every replica reads it. */
  readonly board: SessionBoard
  readonly log: FastifyBaseLogger
}

/** The board field holding a session's reader health. */
const HEALTH_FIELD = 'health'
/** The last activity alone republishes a summary at most this often. */
const ACTIVITY_REPUBLISH_MS = 5000
const SUBSCRIBE_RETRY_MS = 2000
const HEALTH: ReadonlySet<string> = new Set(['live', 'not_up', 'token_refused', 'unreachable'])

/** One watched session on this replica: its fold, its bus subscription and its listeners. */
class SummaryWatch implements Subscriber {
  readonly kasmId: string
  readonly log: FastifyBaseLogger
  readonly fold = new SummaryFold()
  readonly listeners = new Set<SummaryListener>()
  readonly taps: ReadonlySet<TransitionTap>
  health: UpstreamHealth = 'unknown'
  publication: SummaryPublication
  subscription: Subscription | null = null
  retry: NodeJS.Timeout | null = null
  release: (() => void) | null = null
  closed = false
  #revision = -1
  #publishedActivity = 0

  constructor(kasmId: string, log: FastifyBaseLogger, taps: ReadonlySet<TransitionTap>) {
    this.kasmId = kasmId
    this.log = log
    this.taps = taps
    this.publication = { kasmId, summary: this.fold.snapshot(), health: this.health }
    this.#revision = this.fold.revision
  }

  deliver(batch: readonly Delivery[], replay?: boolean): void {
    if (this.closed) return
    for (const d of batch) {
      const transitions = this.fold.apply(d.message)
      for (const t of transitions) this.#transition(t, replay === true)
    }
    this.publish(false)
  }

  /** Rebuilds and hands out the publication when something changed (`force`: health or a new listener). */
  publish(force: boolean): void {
    // Read without a snapshot: each event unsets it, so building one here would cost a whole summary per event
    // of every watched session just to read one field.
    const activity = Date.parse(this.fold.lastActivity ?? '') || 0
    const stale = Math.abs(activity - this.#publishedActivity) >= ACTIVITY_REPUBLISH_MS
    if (!force && this.fold.revision === this.#revision && !stale) return
    this.#revision = this.fold.revision
    this.#publishedActivity = activity
    this.publication = { kasmId: this.kasmId, summary: this.fold.snapshot(), health: this.health }
    for (const listener of this.listeners) {
      try {
        listener.summary(this.publication)
      } catch (err) {
        this.log.error({ err, kasmId: this.kasmId }, 'summary listener failed')
      }
    }
  }

  #transition(t: Transition, replay: boolean): void {
    for (const listener of this.listeners) this.#tell(() => listener.transition?.(this.kasmId, t, replay))
    for (const tap of this.taps) this.#tell(() => tap(this.kasmId, t, replay))
  }

  #tell(call: () => void): void {
    try {
      call()
    } catch (err) {
      this.log.error({ err, kasmId: this.kasmId }, 'summary transition listener failed')
    }
  }
}

/**
 * The session summaries of this replica: one {@link SummaryFold} per watched session (never one per
 * viewer), fed by the event bus this replica subscribes to anyway (in a cluster every replica folds the
 * same Redis stream), with the reader's health from the {@link SessionBoard}. A change is prepared once
 * and handed to every listener.
 */
export class SessionSummaries {
  readonly #o: SessionSummariesOptions
  readonly #watches = new Map<string, SummaryWatch>()
  readonly #taps = new Set<TransitionTap>()
  readonly #offBoard: () => void
  #closed = false

  constructor(options: SessionSummariesOptions) {
    this.#o = options
    this.#offBoard = options.board.onChange((kasmId) => {
      if (kasmId === null) for (const watch of this.#watches.values()) void this.#readHealth(watch)
      else {
        const watch = this.#watches.get(kasmId)
        if (watch !== undefined) void this.#readHealth(watch)
      }
    })
  }

  /** Sessions watched now (tests, metrics). */
  get watched(): number {
    return this.#watches.size
  }

  /** The current publication of a watched session. */
  publication(kasmId: string): SummaryPublication | undefined {
    return this.#watches.get(kasmId)?.publication
  }

  /**
   * Watches a session for `listener`: its summary now (at once, then after every change) and its
   * transitions. The first watch of a session subscribes to its events and keeps its upstream stream read;
   * the returned function ends this listener's watch, the last one ends the session's.
   */
  watch(kasmId: string, listener: SummaryListener): () => void {
    let watch = this.#watches.get(kasmId)
    if (watch === undefined) {
      watch = new SummaryWatch(kasmId, this.#o.log, this.#taps)
      this.#watches.set(kasmId, watch)
      this.#start(watch)
    }
    const current = watch
    current.listeners.add(listener)
    listener.summary(current.publication)
    return () => {
      if (!current.listeners.delete(listener) || current.listeners.size > 0) return
      this.#stop(current)
    }
  }

  /**
   * Calls `tap` with the transitions of every session summarised on this replica, whoever watches it (the
   * overview, attention routing), without watching any itself: the team report counts what the gateway folds
   * anyway. Returns the function that stops it.
   */
  onTransition(tap: TransitionTap): () => void {
    this.#taps.add(tap)
    return () => this.#taps.delete(tap)
  }

  /** Records a reader's health for every replica (this replica holds the session's lease). */
  reportHealth(kasmId: string, health: ReaderHealth): void {
    this.#o.board.set(kasmId, HEALTH_FIELD, health).catch((err: unknown) => {
      this.#o.log.warn({ err, kasmId }, 'upstream health not shared')
    })
  }

  /** Ends every watch. */
  async close(): Promise<void> {
    this.#closed = true
    this.#offBoard()
    for (const watch of [...this.#watches.values()]) this.#stop(watch)
  }

  #start(watch: SummaryWatch): void {
    if (this.#closed) return
    watch.release = this.#o.retain(watch.kasmId)
    void this.#readHealth(watch)
    this.#subscribe(watch)
  }

  #subscribe(watch: SummaryWatch): void {
    watch.retry = null
    this.#o.bus.subscribe(watch.kasmId, {}, watch).then(
      (subscription) => {
        if (watch.closed) subscription.close()
        else watch.subscription = subscription
      },
      (err: unknown) => {
        // The bus's store is away (cluster mode): try again while the summary is wanted.
        this.#o.log.warn({ err, kasmId: watch.kasmId }, 'summary could not subscribe to events; retrying')
        if (watch.closed) return
        watch.retry = setTimeout(() => this.#subscribe(watch), SUBSCRIBE_RETRY_MS)
        watch.retry.unref()
      },
    )
  }

  #stop(watch: SummaryWatch): void {
    watch.closed = true
    if (watch.retry !== null) clearTimeout(watch.retry)
    if (this.#watches.get(watch.kasmId) === watch) this.#watches.delete(watch.kasmId)
    watch.subscription?.close()
    watch.subscription = null
    watch.release?.()
    watch.release = null
  }

  async #readHealth(watch: SummaryWatch): Promise<void> {
    let value: string | undefined
    try {
      value = (await this.#o.board.read(watch.kasmId)).get(HEALTH_FIELD)
    } catch (err) {
      this.#o.log.warn({ err, kasmId: watch.kasmId }, 'upstream health unreadable')
      return
    }
    const health: UpstreamHealth =
      value !== undefined && HEALTH.has(value) ? (value as UpstreamHealth) : 'unknown'
    if (watch.closed || health === watch.health) return
    watch.health = health
    watch.publish(true)
  }
}
