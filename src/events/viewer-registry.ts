import type { Gauge } from 'prom-client'
import { Heartbeat } from './sse.ts'
import type { StreamReservation } from './stream-reservation.ts'
import type { ViewerStream } from './viewer-stream.ts'

/**
 * The open viewer streams of this replica, each with the stream reservation it owns (given back when it is
 * forgotten): counted in the viewers gauge and pinged by one shared heartbeat while they are open, with a
 * promise for the moment the last one is gone (shutdown waits on it).
 */
export class ViewerRegistry implements Iterable<ViewerStream> {
  readonly #viewers = new Map<ViewerStream, StreamReservation>()
  readonly #heartbeat: Heartbeat
  readonly #gauge: Pick<Gauge, 'inc' | 'dec'>
  #emptied: (() => void) | null = null

  constructor(pingIntervalMs: number, gauge: Pick<Gauge, 'inc' | 'dec'>) {
    this.#heartbeat = new Heartbeat(pingIntervalMs)
    this.#gauge = gauge
  }

  get size(): number {
    return this.#viewers.size
  }

  /** Viewers the heartbeat pings (tests assert it matches {@link size}). */
  get heartbeatTargets(): number {
    return this.#heartbeat.size
  }

  /** Whether the heartbeat's timer is armed (it is while any viewer is open). */
  get heartbeatRunning(): boolean {
    return this.#heartbeat.running
  }

  [Symbol.iterator](): Iterator<ViewerStream> {
    return this.#viewers.keys()
  }

  add(viewer: ViewerStream, reservation: StreamReservation): void {
    this.#viewers.set(viewer, reservation)
    this.#gauge.inc()
    this.#heartbeat.add(viewer)
  }

  /** Forgets a viewer whose socket is gone and releases its reservation; false when it was not registered. */
  delete(viewer: ViewerStream): boolean {
    const reservation = this.#viewers.get(viewer)
    if (reservation === undefined) return false
    this.#viewers.delete(viewer)
    reservation.release()
    this.#gauge.dec()
    this.#heartbeat.delete(viewer)
    if (this.#viewers.size === 0) this.#emptied?.()
    return true
  }

  /** Resolves once no viewer is left (at once when none is). */
  emptied(): Promise<void> {
    if (this.#viewers.size === 0) return Promise.resolve()
    return new Promise((resolve) => {
      this.#emptied = resolve
    })
  }

  /** Stops the heartbeat (shutdown: the viewers have been told to go). */
  stopHeartbeat(): void {
    this.#heartbeat.stop()
  }
}
