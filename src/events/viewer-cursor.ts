import type { BusMessage, Delivery } from './bus.ts'

/**
 * What one viewer has been given of a session's stream, so that nothing reaches it twice and nothing of a
 * closed run reaches it after its `closed`: the no-duplicate rule of the hub, for both brokers, in one place.
 *
 * - An event is new unless it is of the viewer's run at or below the last seq it had, or of a run whose
 *   `closed` it had.
 * - A `closed` is new unless it is that of the last run the viewer saw closed.
 *
 * The cursor starts at the viewer's position (`after=&run=` or `Last-Event-ID`), so a reader that restarts
 * behind a viewer (it re-reads a run after the bus lost it) hands that viewer only what follows.
 */
export class ViewerCursor {
  /** The run of the last event delivered (or the run named by the viewer's position). */
  run: string | undefined
  /** The last seq delivered in `run` (or the position's `after`); -1 when none (runtime seqs start at 1). */
  seq: number
  /** The run whose `closed` was delivered last. */
  closedRun: string | undefined

  constructor(run?: string, seq = -1) {
    this.run = run
    this.seq = seq
  }

  /** Whether `m` is new to the viewer; records it as delivered when so. */
  admit(m: BusMessage): boolean {
    if (m.kind === 'closed') {
      if (m.run === this.closedRun) return false
      this.closedRun = m.run
      return true
    }
    if (m.run === this.closedRun || (m.run === this.run && m.seq <= this.seq)) return false
    this.run = m.run
    this.seq = m.seq
    return true
  }

  /**
   * Whether `other` admits what this cursor admits from now on: same run and seq, and the same `closed` had
   * of the current run. A `closed` of an earlier run is not compared: a run once closed never comes back (a
   * new run has a new id, and the reader resumes from the head), and comparing it would keep every viewer
   * that joined after a run closed out of step for good.
   */
  inStepWith(other: ViewerCursor): boolean {
    if (this.seq !== other.seq || this.run !== other.run) return false
    return this.closedRun === other.closedRun || (this.closedRun !== this.run && other.closedRun !== this.run)
  }

  /**
   * The deliveries of `batch` new to the viewer, in order: the very same array when all are (the common
   * case), so every viewer of a session shares one batch and its frames.
   */
  admitAll<D extends Delivery>(batch: readonly D[]): readonly D[] {
    let out: D[] | null = null
    for (let i = 0; i < batch.length; i++) {
      const d = batch[i] as D
      if (this.admits(d)) out?.push(d)
      else if (out === null) out = batch.slice(0, i)
    }
    return out ?? batch
  }

  /** The check {@link admitAll} makes per delivery; the hub adds the broker's offset in front of it. */
  protected admits(d: Delivery): boolean {
    return this.admit(d.message)
  }
}
