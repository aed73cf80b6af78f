import type { Delivery } from './bus.ts'

/** Largest single write of a viewer (keeps one viewer from hogging a turn while it catches up). */
export const MAX_WRITE_BYTES = 64 * 1024

/** Deliveries past which a batch is written piecewise rather than joined into one copy. */
const MAX_JOINED = 64

/**
 * What every viewer of one broadcast needs to know about its batch, worked out once by the hub and handed
 * to all of them: the event count, the single run it is of, and its frames joined into one buffer. A long
 * or large batch (a replay, big events) is not joined: viewers write it in bounded pieces, sharing the
 * broker's frames.
 */
export class PreparedBatch {
  readonly deliveries: readonly Delivery[]
  /** Events in the batch (a `closed` is not one). */
  readonly events: number
  /**
   * The run of every delivery when they share one, none is a `closed` and the batch is small enough to be
   * written in one piece; otherwise null.
   */
  readonly run: string | null
  #bytes: Buffer | null = null

  constructor(deliveries: readonly Delivery[]) {
    let run: string | null = deliveries[0]?.message.run ?? null
    let events = 0
    let bytes = 0
    for (const d of deliveries) {
      if (d.message.kind === 'event') events++
      else run = null
      if (d.message.run !== run) run = null
      bytes += d.frame.length
    }
    this.deliveries = deliveries
    this.events = events
    this.run = deliveries.length <= MAX_JOINED && bytes <= MAX_WRITE_BYTES ? run : null
  }

  /**
   * The batch as one buffer, when {@link run} is not null: the frame itself for a single delivery, else the
   * frames joined on first use (once for every viewer).
   */
  get bytes(): Buffer {
    if (this.#bytes === null) {
      const { deliveries } = this
      this.#bytes =
        deliveries.length === 1
          ? (deliveries[0] as Delivery).frame
          : Buffer.concat(deliveries.map((d) => d.frame))
    }
    return this.#bytes
  }
}
