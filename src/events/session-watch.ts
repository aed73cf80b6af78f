import type { FastifyBaseLogger } from 'fastify'
import type { Session } from '../sessions/types.ts'
import type { Beat, BeatWait } from './beat.ts'
import type { ReaderLease } from './bus.ts'
import type { ReaderStop, UpstreamReader } from './upstream-reader.ts'
import type { ViewerEnd, ViewerStream } from './viewer-stream.ts'

/** What every {@link SessionWatch} of a replica shares. */
export interface SessionWatchDeps {
  readonly lease: ReaderLease
  /** The session as registered now (the reader connects with its version). */
  readonly session: (kasmId: string) => Promise<Session | undefined>
  /** Lease length; renewed every third of it, re-acquired every half of it while another replica holds it. */
  readonly leaseMs: number
  /** The replica's beat every renewal and retry waits on (see `beat.ts`). */
  readonly beat: Beat
  /** How long the reader is kept after the last watcher left (0: stopped at once). */
  readonly lingerMs: number
  readonly log: FastifyBaseLogger
  /** The level of a store failure's log line: debug during a known store outage. */
  readonly storeLevel: (level?: 'warn' | 'error') => 'warn' | 'error' | 'debug'
  /** A reader of the session appending with `fence`, not started; it calls `onStop` if it stops itself. */
  readonly newReader: (kasmId: string, fence: number, onStop: (why: ReaderStop) => void) => UpstreamReader
  /** This replica took the lease and started reading the session. */
  readonly readerStarted: (kasmId: string) => void
  /** The watch is idle with nobody watching: the owner forgets it. */
  readonly retired: (watch: SessionWatch) => void
  /** True once shutdown began: from then on nothing is read. */
  readonly closing: () => boolean
}

/** The lease this replica holds for a session and the reader appending with its fence. */
interface Held {
  readonly reader: UpstreamReader
  readonly fence: number
  /** Session version the reader connects with (a new one restarts it). */
  version: number
  /** The next renewal (re-armed after each one that keeps the lease). */
  readonly renewal: BeatWait
}

/**
 * Where a session's reading stands on this replica:
 * - `idle`: no lease, no reader, no timer;
 * - `acquiring`: asking the lease (and then the registry) whether this replica reads;
 * - `standby`: another replica holds the lease (or the store could not be asked): the watch's retry asks again;
 * - `reading`: this replica holds the lease and its reader runs, renewing the lease;
 * - `lingering`: reading with nobody watching, until `timer` retires the watch.
 */
export type WatchState =
  | { readonly state: 'idle' }
  | { readonly state: 'acquiring' }
  | { readonly state: 'standby' }
  | { readonly state: 'reading'; readonly held: Held }
  | { readonly state: 'lingering'; readonly held: Held; readonly timer: NodeJS.Timeout }

/** The name of a {@link WatchState}. */
export type WatchStateName = WatchState['state']

const IDLE: WatchState = { state: 'idle' }
const STANDBY: WatchState = { state: 'standby' }

/**
 * One session watched on this replica: who watches it (viewers, retainers without a socket, eager mode) and
 * the lease/reader/linger state machine that follows from it. Every transition is a method of this class and
 * goes through {@link SessionWatch.#enter}, which disarms the timers of the state it leaves:
 *
 * | from                 | event                                  | to                                     |
 * | -------------------- | -------------------------------------- | -------------------------------------- |
 * | idle                 | first watcher                          | acquiring                              |
 * | acquiring            | lease granted, session registered      | reading                                |
 * | acquiring            | lease held elsewhere, store failed     | standby                                |
 * | acquiring            | session not registered                 | idle (its viewers end `removed`)       |
 * | acquiring, standby   | last watcher left                      | idle (retired; a late fence given back) |
 * | standby              | retry timer                            | acquiring                              |
 * | reading              | last watcher left                      | lingering; idle (retired) if no linger |
 * | lingering            | a watcher came back                    | reading (the same reader and lease)    |
 * | lingering            | linger timer                           | idle (retired)                         |
 * | reading, lingering   | lease lost (renewal, refused append)   | acquiring if watched, else idle        |
 * | reading, lingering   | session removed                        | idle (its viewers end `removed`)       |
 * | any                  | stop (shutdown)                        | idle                                   |
 *
 * An async step (acquire, renew) that finds the watch in another state than the one it started from gives
 * back what it got and changes nothing: the state object's identity is the guard.
 */
export class SessionWatch {
  readonly kasmId: string
  readonly #d: SessionWatchDeps
  readonly #viewers = new Set<ViewerStream>()
  /** Watchers without a socket (a session summary): each keeps the session read like a viewer does. */
  #retainers = 0
  #eager: boolean
  #state: WatchState = IDLE
  /** Standby's next ask for the lease (armed only in standby). */
  readonly #retry: BeatWait = {
    due: 0,
    fire: () => {
      if (this.#state === STANDBY) this.#acquire()
    },
  }

  constructor(kasmId: string, deps: SessionWatchDeps, eager: boolean) {
    this.kasmId = kasmId
    this.#d = deps
    this.#eager = eager
  }

  /** The current state's name (tests, logs). */
  get state(): WatchStateName {
    return this.#state.state
  }

  /** The viewers of the session on this replica. */
  get viewers(): ReadonlySet<ViewerStream> {
    return this.#viewers
  }

  /** The reader, while this replica reads the session. */
  get reader(): UpstreamReader | null {
    return this.#held?.reader ?? null
  }

  /** Timers armed now (tests assert none outlives its use). */
  get timers(): number {
    const s = this.#state
    if (s.state === 'standby' || s.state === 'reading') return 1
    return s.state === 'lingering' ? 2 : 0
  }

  /** Whether anyone keeps the session read: a viewer, a retainer, or eager mode. */
  get watched(): boolean {
    return this.#viewers.size > 0 || this.#retainers > 0 || this.#eager
  }

  get #held(): Held | null {
    const s = this.#state
    return s.state === 'reading' || s.state === 'lingering' ? s.held : null
  }

  addViewer(viewer: ViewerStream): void {
    this.#viewers.add(viewer)
    this.#watchedAgain()
  }

  removeViewer(viewer: ViewerStream): void {
    if (this.#viewers.delete(viewer)) this.#maybeUnwatched()
  }

  /** Counts a watcher without a socket until the returned function is called (once; later calls do nothing). */
  retain(): () => void {
    this.#retainers++
    this.#watchedAgain()
    let released = false
    return () => {
      if (released) return
      released = true
      this.#retainers--
      this.#maybeUnwatched()
    }
  }

  /** Keeps the session read with nobody watching (GATEWAY_STREAM_EAGER, or `watchAll`). */
  keepEager(): void {
    this.#eager = true
    this.#watchedAgain()
  }

  /** Ends every viewer of the session here. */
  endViewers(why: ViewerEnd): void {
    for (const viewer of this.#viewers) viewer.end(why)
  }

  /** The session was removed: its viewers end, eager mode no longer holds it, and reading stops. */
  async removed(): Promise<void> {
    this.endViewers('removed')
    this.#eager = false
    await this.#retire()
  }

  /**
   * The session's record changed: a reader connected with another version (a rotated token, a moved upstream)
   * reconnects now. Returns whether it did.
   */
  updated(version: number): boolean {
    const held = this.#held
    if (held === null || held.version === version) return false
    held.version = version
    held.reader.restart()
    return true
  }

  /** Shutdown: stops the reader, gives the lease back and disarms every timer. */
  async stop(): Promise<void> {
    const held = this.#held
    this.#enter(IDLE)
    if (held !== null) await this.#letGo(held, true)
  }

  /** The one place the state changes: the timers of the state left are disarmed. */
  #enter(next: WatchState): void {
    const prev = this.#state
    this.#state = next
    const { beat } = this.#d
    if (prev.state === 'standby') beat.disarm(this.#retry)
    if (prev.state === 'lingering') clearTimeout(prev.timer)
    const keeps = (next.state === 'reading' || next.state === 'lingering') && next.held === this.#heldOf(prev)
    if (!keeps) {
      const held = this.#heldOf(prev)
      if (held !== null) beat.disarm(held.renewal)
    }
  }

  #heldOf(s: WatchState): Held | null {
    return s.state === 'reading' || s.state === 'lingering' ? s.held : null
  }

  /** A watcher arrived: start acquiring from idle, or take a lingering reader back. */
  #watchedAgain(): void {
    if (this.#d.closing()) return
    const s = this.#state
    if (s.state === 'idle') this.#acquire()
    else if (s.state === 'lingering') this.#enter({ state: 'reading', held: s.held })
  }

  /** A watcher left: with nobody left, a reader lingers, anything else retires at once. */
  #maybeUnwatched(): void {
    if (this.watched || this.#d.closing()) return
    const s = this.#state
    if (s.state === 'reading' && this.#d.lingerMs > 0) {
      const timer = setTimeout(() => void this.#retire(), this.#d.lingerMs)
      timer.unref()
      this.#enter({ state: 'lingering', held: s.held, timer })
      return
    }
    void this.#retire()
  }

  /** Nobody watches (and the linger passed): stop reading and be forgotten. */
  async #retire(): Promise<void> {
    if (this.watched) return
    const held = this.#held
    this.#enter(IDLE)
    this.#d.retired(this)
    if (held !== null) await this.#letGo(held, true)
  }

  #acquire(): void {
    const acquiring: WatchState = { state: 'acquiring' }
    this.#enter(acquiring)
    void this.#tryAcquire(acquiring)
  }

  async #tryAcquire(acquiring: WatchState): Promise<void> {
    const { lease, log } = this.#d
    const kasmId = this.kasmId
    let fence: number | null = null
    try {
      fence = await lease.acquire(kasmId)
    } catch (err) {
      log[this.#d.storeLevel()]({ err, kasmId }, 'reader lease unavailable; retrying')
    }
    if (this.#state !== acquiring) {
      if (fence !== null) await lease.release(kasmId, fence).catch(() => {})
      return
    }
    if (fence === null) {
      // Another replica reads (or the store is down): keep trying, so a failover needs no viewer to reconnect.
      this.#standby()
      return
    }
    let session: Session | undefined
    try {
      session = await this.#d.session(kasmId)
    } catch (err) {
      log[this.#d.storeLevel()]({ err, kasmId }, 'event reader could not start; retrying')
      await lease.release(kasmId, fence).catch(() => {})
      if (this.#state === acquiring) this.#standby()
      return
    }
    if (this.#state !== acquiring) {
      await lease.release(kasmId, fence).catch(() => {})
      return
    }
    if (session === undefined) {
      this.#enter(IDLE)
      await lease.release(kasmId, fence).catch(() => {})
      this.#gone()
      return
    }
    const held: Held = {
      reader: this.#d.newReader(kasmId, fence, (why) => this.#readerStopped(held, why)),
      fence,
      version: session.version,
      renewal: { due: 0, fire: () => void this.#renew(held) },
    }
    this.#enter({ state: 'reading', held })
    this.#renewLater(held)
    held.reader.start()
    log.info({ kasmId }, 'upstream event reader started')
    this.#d.readerStarted(kasmId)
  }

  #standby(): void {
    this.#enter(STANDBY)
    this.#d.beat.arm(this.#retry, this.#d.leaseMs / 2)
  }

  #renewLater(held: Held): void {
    this.#d.beat.arm(held.renewal, this.#d.leaseMs / 3)
  }

  async #renew(held: Held): Promise<void> {
    const { lease, log } = this.#d
    const kasmId = this.kasmId
    let kept = false
    let unreachable = false
    try {
      kept = await lease.renew(kasmId, held.fence)
    } catch (err) {
      unreachable = true
      log[this.#d.storeLevel()]({ err, kasmId }, 'reader lease renewal failed')
    }
    if (this.#held !== held) return
    if (kept) {
      this.#renewLater(held)
      return
    }
    log[this.#d.storeLevel()]({ kasmId }, 'reader lease lost; another replica reads now')
    this.#enter(IDLE)
    // The store could not be asked: give the lease up here as well (in the store it expires), so this replica
    // no longer counts it as held.
    await this.#letGo(held, unreachable)
    this.#afterLoss()
  }

  /** The reader stopped itself: its append was refused (another replica took over) or the session is gone. */
  #readerStopped(held: Held, why: ReaderStop): void {
    if (this.#held !== held) return
    this.#enter(IDLE)
    if (why === 'session_removed') this.#gone()
    else this.#afterLoss()
  }

  /** The session is not registered: its viewers end (and retire the watch as they go), or it retires now. */
  #gone(): void {
    this.endViewers('removed')
    if (this.#viewers.size === 0) void this.#retire()
  }

  /** The lease was lost: watched, try to take it back (standby at worst); lingering, retire. */
  #afterLoss(): void {
    if (this.#state !== IDLE) return
    if (this.watched) this.#watchedAgain()
    else void this.#retire()
  }

  /** Stops the reader and, when asked, gives the lease back (the reader first, so it appends nothing more). */
  async #letGo(held: Held, release: boolean): Promise<void> {
    await held.reader.stop()
    if (release) {
      this.#d.log.info({ kasmId: this.kasmId }, 'upstream event reader stopped')
      await this.#d.lease.release(this.kasmId, held.fence).catch(() => {})
    }
  }
}
