import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Dispatcher } from 'undici'
import { endRevoked, recheckHolders } from '../auth/held-credentials.ts'
import { type Operator, seesTeam } from '../auth/operator.ts'
import { TooManyStreams } from '../errors.ts'
import type { Session, SessionRegistry } from '../sessions/types.ts'
import type { EventBus, ReaderLease, StreamPosition } from './bus.ts'
import type { EventMetrics } from './metrics.ts'
import { Heartbeat } from './sse.ts'
import type { StreamSlots } from './stream-slots.ts'
import type { TraceBackfill } from './trace-backfill.ts'
import { type ReaderHealth, type ReaderTiming, UpstreamReader } from './upstream-reader.ts'
import { type ViewerEnd, type ViewerShared, ViewerStream } from './viewer-stream.ts'

/** Limits and intervals of the event path (from the environment; tests shorten them). */
export interface SessionStreamsLimits {
  readonly maxQueuedBytes: number
  /** The per-operator cap, for the refusal's message (the count itself is {@link SessionStreamsOptions.slots}). */
  readonly maxStreamsPerOperator: number
  readonly lingerMs: number
  readonly eager: boolean
  readonly authRecheckMs: number
  readonly pingIntervalMs: number
  /** Lease length; renewed every third of it, re-acquired every half of it while another replica holds it. */
  readonly leaseMs: number
  /** The largest event a reader keeps (GATEWAY_EVENT_MAX_BYTES). */
  readonly maxEventBytes: number
}

/** What {@link SessionStreams} works with; it owns the readers, viewers and timers, none of these. */
export interface SessionStreamsOptions {
  readonly bus: EventBus
  readonly lease: ReaderLease
  /** Each operator's open streams: this replica's count, or every replica's in cluster mode. */
  readonly slots: StreamSlots
  readonly sessions: SessionRegistry
  /** The dispatcher for a session's upstream (the URL policy guards admin-registered ones). */
  readonly dispatcherFor: (session: Session) => Dispatcher
  readonly backfill: TraceBackfill
  readonly timing: ReaderTiming
  readonly limits: SessionStreamsLimits
  /** Whether the operator's credential is still good (cookie not revoked, token not expired). */
  readonly stillValid: (operator: Operator) => Promise<boolean>
  readonly log: FastifyBaseLogger
  readonly metrics: EventMetrics
  /**
   * True while the bus's and lease's store (Redis) is known to be away: the failures that follow are logged at
   * debug, since the outage itself is logged once where it is detected.
   */
  readonly storeOutage?: () => boolean
}

/** One session watched on this replica: its viewers here, and its reader if this replica holds the lease. */
interface Watch {
  readonly kasmId: string
  readonly viewers: Set<ViewerStream>
  /** Watchers without a socket (a session summary): each keeps the session read like a viewer does. */
  retainers: number
  reader: UpstreamReader | null
  fence: number | null
  /** Session version the reader connects with (a new one restarts it). */
  version: number
  /** Renews the lease while reading, or retries acquiring it while another replica reads. */
  leaseTimer: NodeJS.Timeout | null
  lingerTimer: NodeJS.Timeout | null
  acquiring: boolean
  eager: boolean
}

/**
 * The coordinator of the event path. Counts viewers per session, runs exactly one {@link UpstreamReader}
 * per watched session (while this replica holds its {@link ReaderLease}; the others only subscribe and keep
 * trying to take the lease over), keeps it a while after the last viewer leaves, restarts it when the
 * session's token rotates, and ends viewers whose credential was revoked or whose session went away.
 */
export class SessionStreams {
  readonly #o: SessionStreamsOptions
  readonly #watches = new Map<string, Watch>()
  readonly #viewers = new Set<ViewerStream>()
  readonly #heartbeat: Heartbeat
  #authTimer: NodeJS.Timeout | null = null
  #authCheckRunning = false
  #closing = false
  #allGone: (() => void) | null = null
  #closed: Promise<void> | null = null
  readonly #offChange: () => void
  readonly #shared: ViewerShared
  readonly #healthListeners = new Set<(kasmId: string, health: ReaderHealth) => void>()
  readonly #readerListeners = new Set<(kasmId: string) => void>()

  constructor(options: SessionStreamsOptions) {
    this.#o = options
    this.#shared = {
      maxQueuedBytes: options.limits.maxQueuedBytes,
      metrics: options.metrics,
      log: options.log,
      owner: {
        fillGap: (viewer, run, from, to) => this.#fillGap(viewer.kasmId, run, from, to),
        viewerEnded: (viewer, why) => {
          this.release(viewer.operator)
          this.#viewerGone(viewer, why)
        },
      },
    }
    this.#heartbeat = new Heartbeat(options.limits.pingIntervalMs)
    this.#offChange = options.sessions.onChange((kasmId) => {
      void this.#sessionChanged(kasmId).catch((err: unknown) => {
        options.log.error({ err, kasmId }, 'event stream update after a session change failed')
      })
    })
  }

  /** Counts for tests and metrics: viewers, watched sessions, readers, timers. Nothing may outlive its use. */
  stats(): { viewers: number; sessions: number; readers: number; heartbeatTargets: number; timers: number } {
    let readers = 0
    let timers = 0
    for (const w of this.#watches.values()) {
      if (w.reader !== null) readers++
      if (w.leaseTimer !== null) timers++
      if (w.lingerTimer !== null) timers++
    }
    if (this.#authTimer !== null) timers++
    if (this.#heartbeat.running) timers++
    return {
      viewers: this.#viewers.size,
      sessions: this.#watches.size,
      readers,
      heartbeatTargets: this.#heartbeat.size,
      timers,
    }
  }

  /** The open viewer streams, of one session or all (tests, admin tooling). */
  viewers(kasmId?: string): ViewerStream[] {
    if (kasmId === undefined) return [...this.#viewers]
    return [...(this.#watches.get(kasmId)?.viewers ?? [])]
  }

  /** The reader of a session on this replica, if it reads (tests). */
  reader(kasmId: string): UpstreamReader | null {
    return this.#watches.get(kasmId)?.reader ?? null
  }

  /**
   * Reserves one of the operator's streams (on any replica, in cluster mode); throws 429 `too_many_streams`
   * at the cap. Call before hijacking the response; the reservation is released when the viewer ends, or by
   * {@link release} if the stream is never opened.
   */
  async reserve(operator: Operator): Promise<void> {
    if (!(await this.#o.slots.take(operator.sub))) {
      throw new TooManyStreams(String(this.#o.limits.maxStreamsPerOperator))
    }
  }

  /** Gives back a reservation of a stream that was not opened. */
  release(operator: Operator): void {
    this.#o.slots.give(operator.sub)
  }

  /**
   * Opens a viewer stream on a taken-over socket: replay from `position`, then live. The operator's
   * reservation ({@link reserve}) is released when the stream ends.
   */
  async open(
    kasmId: string,
    operator: Operator,
    socket: Socket,
    position: StreamPosition,
    requestId: string,
  ): Promise<ViewerStream> {
    const viewer = new ViewerStream(this.#shared, socket, kasmId, operator, position, requestId)
    this.#viewers.add(viewer)
    this.#o.metrics.viewers.inc()
    this.#heartbeat.add(viewer)
    this.#ensureAuthTimer()
    const watch = this.#watch(kasmId)
    watch.viewers.add(viewer)
    if (watch.lingerTimer !== null) {
      clearTimeout(watch.lingerTimer)
      watch.lingerTimer = null
    }
    this.#ensureReading(watch)
    if (this.#closing) viewer.end('shutdown')
    try {
      viewer.attach(await this.#o.bus.subscribe(kasmId, position, viewer))
    } catch (err) {
      this.#o.log[this.#storeLevel('error')]({ err, kasmId }, 'event bus subscribe failed')
      viewer.end('shutdown')
    }
    return viewer
  }

  /**
   * Ends at once the streams of these cookie sessions (by id hash), revoked on this replica or another: a
   * sign-out reaches open streams without waiting for the periodic recheck. Returns how many ended.
   */
  endCookieSessions(idHashes: readonly string[]): number {
    return endRevoked(this.#viewers, idHashes)
  }

  /** Checks every open stream's credential now (revocations may have been missed while Redis was away). */
  recheckCredentials(): Promise<void> {
    return this.#recheckAuth()
  }

  /**
   * Counts as a watcher of the session without a viewer socket: its upstream stream is read (on this replica
   * or the lease holder's) until the returned release is called, then lingers as after the last viewer.
   * A session summary folds the bus while it holds this.
   */
  retain(kasmId: string): () => void {
    const watch = this.#watch(kasmId)
    watch.retainers++
    if (watch.lingerTimer !== null) {
      clearTimeout(watch.lingerTimer)
      watch.lingerTimer = null
    }
    this.#ensureReading(watch)
    let released = false
    return () => {
      if (released) return
      released = true
      watch.retainers--
      this.#unwatched(watch)
    }
  }

  /** Calls `listener` when a reader of this replica finds its runtime's health changed (the summaries share it). */
  onHealth(listener: (kasmId: string, health: ReaderHealth) => void): () => void {
    this.#healthListeners.add(listener)
    return () => this.#healthListeners.delete(listener)
  }

  /**
   * Calls `listener` when this replica starts reading a session (it took the reader lease): whatever only the
   * reader does (sending notifications) starts now.
   */
  onReaderStart(listener: (kasmId: string) => void): () => void {
    this.#readerListeners.add(listener)
    return () => this.#readerListeners.delete(listener)
  }

  /** Watches every registered session with its reader kept running (GATEWAY_STREAM_EAGER). */
  async watchAll(): Promise<void> {
    for (const view of await this.#o.sessions.list()) {
      const watch = this.#watch(view.kasmId)
      watch.eager = true
      this.#ensureReading(watch)
    }
  }

  /**
   * Stops every reader and frees its lease first (another replica takes over at once), then ends every viewer
   * cleanly so it reconnects elsewhere: all at once, or spread evenly over `spreadMs` so a replica's viewers
   * do not land on the others in one burst. Waits up to `graceMs` more for their sockets to close, then
   * destroys the rest. Calling it again returns the first call's promise.
   */
  close(graceMs = 2000, spreadMs = 0): Promise<void> {
    this.#closed ??= this.#close(graceMs, spreadMs)
    return this.#closed
  }

  async #close(graceMs: number, spreadMs: number): Promise<void> {
    this.#closing = true
    this.#offChange()
    const allGone = new Promise<void>((resolve) => {
      this.#allGone = resolve
    })
    if (this.#authTimer !== null) clearInterval(this.#authTimer)
    this.#authTimer = null
    await Promise.all([...this.#watches.values()].map((w) => this.#stopReading(w)))
    await this.#endAllSpread(spreadMs)
    this.#heartbeat.stop()
    if (this.#viewers.size > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        allGone,
        new Promise((r) => {
          timer = setTimeout(r, graceMs)
          timer.unref()
        }),
      ])
      clearTimeout(timer)
      for (const viewer of this.#viewers) viewer.destroy()
    }
    for (const w of this.#watches.values()) this.#clearTimers(w)
    this.#watches.clear()
  }

  /** Ends the viewers in equal slices, one slice every 100 ms over `spreadMs` (all now when 0). */
  async #endAllSpread(spreadMs: number): Promise<void> {
    const viewers = [...this.#viewers]
    const slices = Math.max(1, Math.floor(spreadMs / 100))
    const perSlice = Math.ceil(viewers.length / slices)
    for (let i = 0; i < viewers.length; i += perSlice) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100))
      for (const viewer of viewers.slice(i, i + perSlice)) viewer.end('shutdown')
    }
  }

  #watch(kasmId: string): Watch {
    let watch = this.#watches.get(kasmId)
    if (watch === undefined) {
      watch = {
        kasmId,
        viewers: new Set(),
        retainers: 0,
        reader: null,
        fence: null,
        version: 0,
        leaseTimer: null,
        lingerTimer: null,
        acquiring: false,
        eager: this.#o.limits.eager,
      }
      this.#watches.set(kasmId, watch)
    }
    return watch
  }

  #wanted(watch: Watch): boolean {
    return (
      !this.#closing &&
      (watch.viewers.size > 0 || watch.retainers > 0 || watch.eager || watch.lingerTimer !== null)
    )
  }

  /** Becomes the session's reader if the lease allows; otherwise retries while the session is wanted. */
  #ensureReading(watch: Watch): void {
    if (watch.reader !== null || watch.acquiring || !this.#wanted(watch)) return
    watch.acquiring = true
    void this.#acquire(watch)
      .catch((err: unknown) => {
        // The registry or the lease store failed: try again while the session is still wanted.
        this.#o.log[this.#storeLevel()](
          { err, kasmId: watch.kasmId },
          'event reader could not start; retrying',
        )
        this.#setLeaseTimer(watch, this.#o.limits.leaseMs / 2, () => {
          watch.leaseTimer = null
          this.#ensureReading(watch)
        })
      })
      .finally(() => {
        watch.acquiring = false
      })
  }

  async #acquire(watch: Watch): Promise<void> {
    const { lease, limits, log } = this.#o
    let fence: number | null = null
    try {
      fence = await lease.acquire(watch.kasmId)
    } catch (err) {
      log[this.#storeLevel()]({ err, kasmId: watch.kasmId }, 'reader lease unavailable; retrying')
    }
    if (!this.#wanted(watch)) {
      if (fence !== null) await lease.release(watch.kasmId, fence).catch(() => {})
      return
    }
    if (fence === null) {
      // Another replica reads (or the store is down): keep trying, so a failover needs no viewer to reconnect.
      this.#setLeaseTimer(watch, limits.leaseMs / 2, () => {
        watch.leaseTimer = null
        this.#ensureReading(watch)
      })
      return
    }
    const session = await this.#o.sessions.get(watch.kasmId)
    if (session === undefined) {
      await lease.release(watch.kasmId, fence).catch(() => {})
      this.#endViewers(watch, 'removed')
      return
    }
    const current = fence
    watch.fence = current
    watch.version = session.version
    const reader = new UpstreamReader({
      kasmId: watch.kasmId,
      session: () => this.#o.sessions.get(watch.kasmId),
      bus: this.#o.bus,
      fence: current,
      dispatcherFor: this.#o.dispatcherFor,
      backfill: this.#o.backfill,
      timing: this.#o.timing,
      log,
      metrics: this.#o.metrics,
      ...(this.#o.storeOutage ? { storeOutage: this.#o.storeOutage } : {}),
      onHealth: (health) => {
        for (const listener of this.#healthListeners) listener(watch.kasmId, health)
      },
      maxEventBytes: limits.maxEventBytes,
      onStop: (why) => {
        if (watch.reader !== reader) return
        watch.reader = null
        watch.fence = null
        this.#clearLeaseTimer(watch)
        if (why === 'session_removed') this.#endViewers(watch, 'removed')
        else this.#ensureReading(watch)
      },
    })
    watch.reader = reader
    reader.start()
    log.info({ kasmId: watch.kasmId }, 'upstream event reader started')
    for (const listener of this.#readerListeners) listener(watch.kasmId)
    this.#setLeaseTimer(watch, limits.leaseMs / 3, () => void this.#renew(watch, reader, current))
  }

  async #renew(watch: Watch, reader: UpstreamReader, fence: number): Promise<void> {
    watch.leaseTimer = null
    let held = false
    let unreachable = false
    try {
      held = await this.#o.lease.renew(watch.kasmId, fence)
    } catch (err) {
      unreachable = true
      this.#o.log[this.#storeLevel()]({ err, kasmId: watch.kasmId }, 'reader lease renewal failed')
    }
    if (watch.reader !== reader) return
    if (held) {
      this.#setLeaseTimer(watch, this.#o.limits.leaseMs / 3, () => void this.#renew(watch, reader, fence))
      return
    }
    this.#o.log[this.#storeLevel()]({ kasmId: watch.kasmId }, 'reader lease lost; another replica reads now')
    watch.reader = null
    watch.fence = null
    // The store could not be asked: give the lease up here as well (in the store it expires), so this replica
    // no longer counts it as held.
    if (unreachable) await this.#o.lease.release(watch.kasmId, fence).catch(() => {})
    await reader.stop()
    this.#ensureReading(watch)
  }

  async #stopReading(watch: Watch): Promise<void> {
    this.#clearLeaseTimer(watch)
    const { reader, fence } = watch
    watch.reader = null
    watch.fence = null
    if (reader !== null) {
      await reader.stop()
      this.#o.log.info({ kasmId: watch.kasmId }, 'upstream event reader stopped')
    }
    if (fence !== null) await this.#o.lease.release(watch.kasmId, fence).catch(() => {})
  }

  /** The level of a store failure's log line: debug during a known store outage. */
  #storeLevel(level: 'warn' | 'error' = 'warn'): 'warn' | 'error' | 'debug' {
    return this.#o.storeOutage?.() ? 'debug' : level
  }

  #viewerGone(viewer: ViewerStream, why: ViewerEnd): void {
    if (!this.#viewers.delete(viewer)) return
    this.#o.metrics.viewers.dec()
    this.#heartbeat.delete(viewer)
    if (this.#viewers.size === 0 && this.#authTimer !== null) {
      clearInterval(this.#authTimer)
      this.#authTimer = null
    }
    this.#o.log.debug({ kasmId: viewer.kasmId, why }, 'viewer stream ended')
    if (this.#viewers.size === 0) this.#allGone?.()
    const watch = this.#watches.get(viewer.kasmId)
    if (watch === undefined) return
    watch.viewers.delete(viewer)
    this.#unwatched(watch)
  }

  /** A viewer or retainer left: with nobody left, the reader lingers, then stops. */
  #unwatched(watch: Watch): void {
    if (watch.viewers.size > 0 || watch.retainers > 0 || watch.eager || this.#closing) return
    const linger = this.#o.limits.lingerMs
    if (linger === 0 || watch.reader === null) {
      void this.#retire(watch)
      return
    }
    watch.lingerTimer = setTimeout(() => {
      watch.lingerTimer = null
      void this.#retire(watch)
    }, linger)
    watch.lingerTimer.unref()
  }

  /** The last viewer left (and the linger passed): stop reading and forget the watch. */
  async #retire(watch: Watch): Promise<void> {
    if (watch.viewers.size > 0 || watch.retainers > 0 || watch.eager) return
    this.#clearTimers(watch)
    if (this.#watches.get(watch.kasmId) === watch) this.#watches.delete(watch.kasmId)
    await this.#stopReading(watch)
  }

  async #sessionChanged(kasmId: string): Promise<void> {
    if (this.#closing) return
    const session = await this.#o.sessions.get(kasmId)
    const watch = this.#watches.get(kasmId)
    if (session === undefined) {
      if (watch !== undefined) {
        this.#endViewers(watch, 'removed')
        watch.eager = false
        await this.#retire(watch)
      }
      await this.#o.bus.drop?.(kasmId)
      return
    }
    if (watch === undefined) {
      if (this.#o.limits.eager) this.#ensureReading(this.#watch(kasmId))
      return
    }
    // A session moved to another team: its viewers who cannot see that team lose the stream.
    for (const viewer of watch.viewers) if (!seesTeam(viewer.operator, session.team)) viewer.end('revoked')
    if (watch.reader !== null && session.version !== watch.version) {
      watch.version = session.version
      this.#o.metrics.reconnects.inc({ reason: 'rotated' })
      this.#o.log.info({ kasmId }, 'session token or upstream changed; reconnecting the event reader')
      watch.reader.restart()
    }
  }

  #endViewers(watch: Watch, why: ViewerEnd): void {
    for (const viewer of watch.viewers) viewer.end(why)
  }

  async #fillGap(kasmId: string, run: string, from: number, to: number) {
    const session = await this.#o.sessions.get(kasmId)
    if (session === undefined) return null
    return this.#o.backfill.fill(session, run, from, to)
  }

  /** One timer for all viewers: ends streams whose credential expired or was revoked. */
  #ensureAuthTimer(): void {
    if (this.#authTimer !== null) return
    this.#authTimer = setInterval(() => void this.#recheckAuth(), this.#o.limits.authRecheckMs)
    this.#authTimer.unref()
  }

  async #recheckAuth(): Promise<void> {
    if (this.#authCheckRunning) return
    this.#authCheckRunning = true
    try {
      await recheckHolders(
        this.#viewers,
        (op) => this.#o.stillValid(op),
        (err) => this.#o.log.warn({ err }, 'credential recheck failed; streams kept until the next check'),
      )
    } finally {
      this.#authCheckRunning = false
    }
  }

  #setLeaseTimer(watch: Watch, ms: number, fn: () => void): void {
    this.#clearLeaseTimer(watch)
    watch.leaseTimer = setTimeout(fn, Math.max(1, Math.round(ms)))
    watch.leaseTimer.unref()
  }

  #clearLeaseTimer(watch: Watch): void {
    if (watch.leaseTimer !== null) clearTimeout(watch.leaseTimer)
    watch.leaseTimer = null
  }

  #clearTimers(watch: Watch): void {
    this.#clearLeaseTimer(watch)
    if (watch.lingerTimer !== null) clearTimeout(watch.lingerTimer)
    watch.lingerTimer = null
  }
}
