import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Dispatcher } from 'undici'
import { endRevoked } from '../auth/held-credentials.ts'
import { type Operator, seesTeam } from '../auth/operator.ts'
import type { Session, SessionRegistry } from '../sessions/types.ts'
import { Beat, beatFor } from './beat.ts'
import type { EventBus, ReaderLease, StreamPosition } from './bus.ts'
import { CredentialRecheck } from './credential-recheck.ts'
import type { EventMetrics } from './metrics.ts'
import { SessionWatch, type SessionWatchDeps } from './session-watch.ts'
import { StreamReservation } from './stream-reservation.ts'
import type { StreamSlots } from './stream-slots.ts'
import type { TraceBackfill } from './trace-backfill.ts'
import { type ReaderHealth, type ReaderStop, type ReaderTiming, UpstreamReader } from './upstream-reader.ts'
import { ViewerRegistry } from './viewer-registry.ts'
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

/**
 * The coordinator of the event path: opens viewer streams on their reservations, keeps one
 * {@link SessionWatch} per watched session (whose state machine runs exactly one {@link UpstreamReader} per
 * session across the replicas, lingering after the last viewer), reacts to session changes (a rotated token
 * reconnects the reader, a team change or a removal ends viewers), ends viewers whose credential was revoked,
 * and spreads the viewers' ends over a drain.
 */
export class SessionStreams {
  readonly #o: SessionStreamsOptions
  readonly #watches = new Map<string, SessionWatch>()
  readonly #viewers: ViewerRegistry
  readonly #recheck: CredentialRecheck
  readonly #watchDeps: SessionWatchDeps
  #closing = false
  #closed: Promise<void> | null = null
  readonly #offChange: () => void
  readonly #shared: ViewerShared
  readonly #healthListeners = new Set<(kasmId: string, health: ReaderHealth) => void>()
  readonly #readerListeners = new Set<(kasmId: string) => void>()

  constructor(options: SessionStreamsOptions) {
    this.#o = options
    this.#viewers = new ViewerRegistry(options.limits.pingIntervalMs, options.metrics.viewers)
    this.#recheck = new CredentialRecheck(
      this.#viewers,
      options.limits.authRecheckMs,
      options.stillValid,
      options.log,
    )
    this.#shared = {
      maxQueuedBytes: options.limits.maxQueuedBytes,
      metrics: options.metrics,
      log: options.log,
      owner: {
        fillGap: (viewer, run, from, to) => this.#fillGap(viewer.kasmId, run, from, to),
        viewerEnded: (viewer, why) => this.#viewerGone(viewer, why),
      },
    }
    this.#watchDeps = {
      lease: options.lease,
      session: (kasmId) => options.sessions.get(kasmId),
      leaseMs: options.limits.leaseMs,
      beat: new Beat(beatFor(options.limits.leaseMs)),
      lingerMs: options.limits.lingerMs,
      log: options.log,
      storeLevel: (level) => this.#storeLevel(level),
      newReader: (kasmId, fence, onStop) => this.#newReader(kasmId, fence, onStop),
      readerStarted: (kasmId) => {
        for (const listener of this.#readerListeners) listener(kasmId)
      },
      retired: (watch) => {
        if (this.#watches.get(watch.kasmId) === watch) this.#watches.delete(watch.kasmId)
      },
      closing: () => this.#closing,
    }
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
      timers += w.timers
    }
    if (this.#recheck.armed) timers++
    if (this.#viewers.heartbeatRunning) timers++
    return {
      viewers: this.#viewers.size,
      sessions: this.#watches.size,
      readers,
      heartbeatTargets: this.#viewers.heartbeatTargets,
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
   * at the cap. Call before hijacking the response; whoever holds the reservation releases it: the caller if
   * the stream never opens, the stream when it ends ({@link open}). Releasing twice gives back one slot.
   */
  reserve(operator: Operator): Promise<StreamReservation> {
    return StreamReservation.take(this.#o.slots, operator, this.#o.limits.maxStreamsPerOperator)
  }

  /**
   * Opens a viewer stream on a taken-over socket: replay from `position`, then live. The stream owns
   * `reservation` from here on and releases it when it ends.
   */
  async open(
    kasmId: string,
    reservation: StreamReservation,
    socket: Socket,
    position: StreamPosition,
    requestId: string,
  ): Promise<ViewerStream> {
    const viewer = new ViewerStream(this.#shared, socket, kasmId, reservation.operator, position, requestId)
    this.#viewers.add(viewer, reservation)
    this.#recheck.arm()
    this.#watch(kasmId).addViewer(viewer)
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
    return this.#recheck.run()
  }

  /**
   * Counts as a watcher of the session without a viewer socket: its upstream stream is read (on this replica
   * or the lease holder's) until the returned release is called, then lingers as after the last viewer.
   * A session summary folds the bus while it holds this.
   */
  retain(kasmId: string): () => void {
    return this.#watch(kasmId).retain()
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
    for (const view of await this.#o.sessions.list()) this.#watch(view.kasmId).keepEager()
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
    this.#recheck.disarm()
    await Promise.all([...this.#watches.values()].map((w) => w.stop()))
    await this.#endAllSpread(spreadMs)
    this.#viewers.stopHeartbeat()
    if (this.#viewers.size > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        this.#viewers.emptied(),
        new Promise((r) => {
          timer = setTimeout(r, graceMs)
          timer.unref()
        }),
      ])
      clearTimeout(timer)
      for (const viewer of this.#viewers) viewer.destroy()
    }
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

  #watch(kasmId: string): SessionWatch {
    let watch = this.#watches.get(kasmId)
    if (watch === undefined) {
      watch = new SessionWatch(kasmId, this.#watchDeps, this.#o.limits.eager)
      this.#watches.set(kasmId, watch)
    }
    return watch
  }

  #newReader(kasmId: string, fence: number, onStop: (why: ReaderStop) => void): UpstreamReader {
    const o = this.#o
    return new UpstreamReader({
      kasmId,
      session: () => o.sessions.get(kasmId),
      bus: o.bus,
      fence,
      dispatcherFor: o.dispatcherFor,
      backfill: o.backfill,
      timing: o.timing,
      log: o.log,
      metrics: o.metrics,
      ...(o.storeOutage ? { storeOutage: o.storeOutage } : {}),
      onHealth: (health) => {
        for (const listener of this.#healthListeners) listener(kasmId, health)
      },
      maxEventBytes: o.limits.maxEventBytes,
      onStop,
    })
  }

  /** The level of a store failure's log line: debug during a known store outage. */
  #storeLevel(level: 'warn' | 'error' = 'warn'): 'warn' | 'error' | 'debug' {
    return this.#o.storeOutage?.() ? 'debug' : level
  }

  #viewerGone(viewer: ViewerStream, why: ViewerEnd): void {
    if (!this.#viewers.delete(viewer)) return
    if (this.#viewers.size === 0) this.#recheck.disarm()
    this.#o.log.debug({ kasmId: viewer.kasmId, why }, 'viewer stream ended')
    this.#watches.get(viewer.kasmId)?.removeViewer(viewer)
  }

  async #sessionChanged(kasmId: string): Promise<void> {
    if (this.#closing) return
    const session = await this.#o.sessions.get(kasmId)
    const watch = this.#watches.get(kasmId)
    if (session === undefined) {
      await watch?.removed()
      await this.#o.bus.drop?.(kasmId)
      return
    }
    if (watch === undefined) {
      if (this.#o.limits.eager) this.#watch(kasmId).keepEager()
      return
    }
    // A session moved to another team: its viewers who cannot see that team lose the stream.
    for (const viewer of watch.viewers) if (!seesTeam(viewer.operator, session.team)) viewer.end('revoked')
    if (watch.updated(session.version)) {
      this.#o.metrics.reconnects.inc({ reason: 'rotated' })
      this.#o.log.info({ kasmId }, 'session token or upstream changed; reconnecting the event reader')
    }
  }

  async #fillGap(kasmId: string, run: string, from: number, to: number) {
    const session = await this.#o.sessions.get(kasmId)
    if (session === undefined) return null
    return this.#o.backfill.fill(session, run, from, to)
  }
}
