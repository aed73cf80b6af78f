/** The replica's beat for lease work (ms) with the default lease; a shorter lease beats faster. */
export const BEAT_MS = 250

/**
 * A wait on a {@link Beat}: made once by its owner (a watch's lease renewal or retry) and armed again each
 * time, so a wait that lasts seconds allocates nothing each time it is armed. Objects that live across a
 * young-generation collection are copied and then promoted; a timer, its closure and a state object made for
 * every renewal of thousands of leases were most of what the reading replica's collections copied (the
 * cluster bench at 2,000 sessions).
 */
export interface BeatWait {
  /** The beat it fires on (ms since the epoch, a multiple of the beat); set by {@link Beat.arm}. */
  due: number
  /** Called in the turn of the beat it falls due on. */
  readonly fire: () => void
}

/**
 * One timer for every lease wait of a replica, ticking on the wall clock's multiples of the beat: each tick
 * fires every armed wait due within the beat before it, in one turn of the event loop, which the Redis lease
 * sends as one script (`reader-lease.ts`); across replicas the ticks fall together too. A wait fires early by
 * less than a beat, never late; it should be at least four beats long.
 */
export class Beat {
  readonly #ms: number
  readonly #armed = new Set<BeatWait>()
  #timer: NodeJS.Timeout | null = null

  /** `ms`: the beat; {@link beatFor} picks it for a lease length. */
  constructor(ms: number) {
    this.#ms = ms
  }

  /** Waits armed now. */
  get armed(): number {
    return this.#armed.size
  }

  /** Arms `wait` (again) to fire `ms` from now, on the beat at or before that. */
  arm(wait: BeatWait, ms: number): void {
    const due = Date.now() + ms
    wait.due = due - (due % this.#ms)
    this.#armed.add(wait)
    if (this.#timer === null) this.#next()
  }

  /** Disarms `wait` (nothing when it is not armed). */
  disarm(wait: BeatWait): void {
    this.#armed.delete(wait)
    this.#stopIfIdle()
  }

  /** The timer to the next multiple of the beat. */
  #next(): void {
    this.#timer = setTimeout(() => this.#tick(), this.#ms - (Date.now() % this.#ms))
    this.#timer.unref()
  }

  #tick(): void {
    const now = Date.now()
    // A wait armed again by its own `fire` is due a whole wait later: this loop passes it by.
    for (const wait of this.#armed) {
      if (wait.due > now) continue
      this.#armed.delete(wait)
      wait.fire()
    }
    this.#timer = null
    if (this.#armed.size > 0) this.#next()
  }

  #stopIfIdle(): void {
    if (this.#armed.size > 0 || this.#timer === null) return
    clearTimeout(this.#timer)
    this.#timer = null
  }
}

/** The beat for a lease of `leaseMs`: its renewal (a third of it) is at least four beats. */
export function beatFor(leaseMs: number): number {
  return Math.min(BEAT_MS, leaseMs / 12)
}
