import type { FastifyBaseLogger } from 'fastify'
import type { Escalations } from '../escalation/engine.ts'
import { plannedTargets } from '../escalation/plan.ts'
import type { SessionRegistry } from '../sessions/types.ts'
import type { SessionSummaries, SummaryListener, SummaryPublication } from '../summary/summaries.ts'
import type { Transition } from '../summary/types.ts'
import { type Notification, notificationOf } from './notification.ts'
import type { NotifyRoutes } from './targets.ts'

/** What {@link NotifyWatcher} works with. */
export interface NotifyWatcherOptions {
  readonly summaries: SessionSummaries
  readonly sessions: SessionRegistry
  /** Whether this replica reads the session now (holds its reader lease): only the reader sends. */
  readonly reading: (kasmId: string) => boolean
  /** The escalation engine: it tracks questions and pauses, and sends every notification to its targets. */
  readonly escalations: Escalations
  /** Whether a chat adapter sends (a team with only chat channels is watched then). */
  readonly chat: boolean
  /** The routes now (they change on SIGHUP). */
  readonly routes: () => NotifyRoutes
  /**
   * How long a notification seen while another replica reads is kept, to be sent should this replica take
   * the lease over (its owner may have died before sending): a few lease times.
   */
  readonly pendingMs: number
  readonly log: FastifyBaseLogger
}

/** Notifications kept per session while another replica reads (a takeover sends those it did not). */
const MAX_PENDING = 200
/**
 * Events this much older than now are history (a reader's first connection gets the run's whole replay
 * buffer): longer than a question's default wait (300 s), so a live question is never taken for history.
 */
const HISTORY_MS = 10 * 60 * 1000
/** Transitions held per session until their batch's summary. */
const MAX_BATCH = 500
/** A reminder needs at least this long before the deadline's half. */
const MIN_REMINDER_MS = 1000

/** One session watched for notifications. */
interface Watched {
  readonly kasmId: string
  team: string
  unwatch: () => void
  /** Seen while not reading, newest last: sent (each claimed once) when this replica starts reading. */
  pending: { notification: Notification; seenAt: number }[]
  /** Transitions of the batch being folded, judged once its summary is published. */
  batch: { transition: Transition; replay: boolean }[]
  /** Half-deadline reminders by request id. */
  readonly reminders: Map<string, NodeJS.Timeout>
  /** The latest summary (a reminder is sent only for a request still open in it). */
  publication: SummaryPublication | null
}

/**
 * Turns the summary transitions of every session with a route into notifications. Watching a session's
 * summary keeps its event stream read (on whichever replica holds its lease) even when nobody views it; every
 * replica folds the stream, the reader sends. A replica that is not the reader keeps what it saw for a while
 * (`pendingMs`): when it takes over, it sends those its predecessor did not claim.
 *
 * Transitions replayed from stored events when a watch starts (a boot, a route added), or of events older than
 * ten minutes (a run's replay buffer on a reader's first connection), are history: only the question and the
 * handoff still open once they are folded are notified (and deduped by the ledger).
 */
export class NotifyWatcher {
  readonly #o: NotifyWatcherOptions
  readonly #watched = new Map<string, Watched>()
  #closed = false

  constructor(options: NotifyWatcherOptions) {
    this.#o = options
  }

  /** Sessions watched now (tests). */
  get watched(): number {
    return this.#watched.size
  }

  /** Watches every session with a route and stops watching the others (boot, routes reloaded). */
  async syncAll(): Promise<void> {
    const views = await this.#o.sessions.list()
    const ids = new Set(views.map((v) => v.kasmId))
    for (const kasmId of [...this.#watched.keys()]) if (!ids.has(kasmId)) this.#unwatch(kasmId)
    for (const view of views) this.#apply(view.kasmId, view.team)
  }

  /** A session was added, changed or removed. */
  async sync(kasmId: string): Promise<void> {
    const session = await this.#o.sessions.get(kasmId)
    if (session === undefined) this.#unwatch(kasmId)
    else this.#apply(kasmId, session.team)
  }

  /**
   * This replica started reading the session: it sends what it kept while another replica read, then the
   * escalation engine takes up the open questions where their records say.
   */
  readerStarted(kasmId: string): void {
    const watched = this.#watched.get(kasmId)
    if (watched === undefined) return
    const fresh = watched.pending.filter((p) => Date.now() - p.seenAt <= this.#o.pendingMs)
    watched.pending = []
    for (const { notification } of fresh) this.#send(notification)
    this.#o.escalations.readerStarted(kasmId)
  }

  close(): void {
    this.#closed = true
    for (const kasmId of [...this.#watched.keys()]) this.#unwatch(kasmId)
  }

  #apply(kasmId: string, team: string): void {
    if (this.#closed) return
    const routed = plannedTargets(this.#o.routes(), team, this.#o.chat).length > 0
    const watched = this.#watched.get(kasmId)
    if (!routed) {
      if (watched !== undefined) this.#unwatch(kasmId)
      return
    }
    if (watched !== undefined) {
      watched.team = team
      return
    }
    const entry: Watched = {
      kasmId,
      team,
      unwatch: () => {},
      pending: [],
      batch: [],
      reminders: new Map(),
      publication: null,
    }
    this.#watched.set(kasmId, entry)
    const listener: SummaryListener = {
      summary: (publication) => this.#summary(entry, publication),
      transition: (_id, transition, replay) => {
        if (entry.batch.length < MAX_BATCH) entry.batch.push({ transition, replay })
      },
    }
    entry.unwatch = this.#o.summaries.watch(kasmId, listener)
  }

  #unwatch(kasmId: string): void {
    const watched = this.#watched.get(kasmId)
    if (watched === undefined) return
    this.#watched.delete(kasmId)
    this.#o.escalations.forget(kasmId)
    for (const timer of watched.reminders.values()) clearTimeout(timer)
    watched.reminders.clear()
    watched.unwatch()
  }

  /**
   * A batch was folded: its transitions are live, or history when they were replayed from stored events or
   * their events are old (the run's replay buffer on a reader's first connection). Of history, only what is
   * still open after the batch is notified: the question still asked, the handoff still waiting.
   */
  #summary(entry: Watched, publication: SummaryPublication): void {
    entry.publication = publication
    if (entry.batch.length === 0) return
    const batch = entry.batch
    entry.batch = []
    const summary = publication.summary
    const old = Date.now() - (Date.parse(summary.lastActivity ?? '') || Date.now()) > HISTORY_MS
    for (const { transition: t, replay } of batch) {
      if (!replay && !old) {
        this.#transition(entry, t, false)
        continue
      }
      if (t.run !== summary.run) continue
      const current =
        (t.type === 'request.opened' &&
          summary.openRequests.some((r) => r.requestId === t.request.requestId)) ||
        (t.type === 'escalation.started' && summary.escalation !== null)
      if (current) this.#transition(entry, t, false)
    }
  }

  #transition(entry: Watched, t: Transition, reminder: boolean): void {
    if (this.#closed) return
    if (t.type === 'request.opened' && !reminder) this.#scheduleReminder(entry, t)
    if (t.type === 'request.closed') {
      clearTimeout(entry.reminders.get(t.request.requestId))
      entry.reminders.delete(t.request.requestId)
    }
    const notification = notificationOf(entry.kasmId, entry.team, t, { reminder })
    if (notification === null) return
    // Openings are the engine's on every replica: the reader sends their steps, a new reader takes them up.
    if (!reminder && (t.type === 'request.opened' || t.type === 'escalation.started')) {
      const deadline =
        t.type === 'request.opened'
          ? t.request.deadline
          : (entry.publication?.summary.escalation?.endsAt ?? null)
      this.#o.escalations.opened(notification, deadline)
      return
    }
    if (t.type === 'request.closed' || t.type === 'escalation.ended') this.#o.escalations.closed(notification)
    if (this.#o.reading(entry.kasmId)) {
      this.#send(notification)
      return
    }
    entry.pending.push({ notification, seenAt: Date.now() })
    const cutoff = Date.now() - this.#o.pendingMs
    while (entry.pending.length > MAX_PENDING || (entry.pending[0]?.seenAt ?? Infinity) < cutoff)
      entry.pending.shift()
  }

  /** At half the time between now and the deadline, `request.opened` again with `reminder: true` (once). */
  #scheduleReminder(entry: Watched, t: Extract<Transition, { type: 'request.opened' }>): void {
    const deadline = Date.parse(t.request.deadline ?? '')
    if (Number.isNaN(deadline)) return
    const half = (deadline - Date.now()) / 2
    if (half < MIN_REMINDER_MS || entry.reminders.has(t.request.requestId)) return
    const timer = setTimeout(() => {
      entry.reminders.delete(t.request.requestId)
      const summary = entry.publication?.summary
      const open =
        summary?.run === t.run && summary.openRequests.some((r) => r.requestId === t.request.requestId)
      if (open && this.#watched.get(entry.kasmId) === entry) this.#transition(entry, t, true)
    }, half)
    timer.unref()
    entry.reminders.set(t.request.requestId, timer)
  }

  /** Closings and reminders go to the targets notified so far; a run's end to those without `after_s`. */
  #send(n: Notification): void {
    const esc = this.#o.escalations
    const sending =
      n.type === 'request.closed' || n.type === 'escalation.ended'
        ? esc.sendClosing(n)
        : n.reminder
          ? esc.sendReminder(n)
          : esc.sendOther(n)
    sending.catch((err: unknown) =>
      this.#o.log.error({ err, kasmId: n.kasmId, type: n.type }, 'notification not sent'),
    )
  }
}
