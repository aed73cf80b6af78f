import type { Operator } from '../auth/operator.ts'
import { TooManyStreams } from '../errors.ts'
import type { StreamSlots } from './stream-slots.ts'

/**
 * One of an operator's stream slots, taken before a stream's response is hijacked and owned from then on by
 * whoever holds this object: the route until the stream opens, then the stream. Releasing it more than once
 * gives back one slot, so a failure path and the stream's end may both release it.
 */
export class StreamReservation {
  readonly operator: Operator
  readonly #slots: StreamSlots
  #held = true

  private constructor(slots: StreamSlots, operator: Operator) {
    this.#slots = slots
    this.operator = operator
  }

  /** Takes one of `operator`'s slots; throws 429 `too_many_streams` when all `max` are taken. */
  static async take(slots: StreamSlots, operator: Operator, max: number): Promise<StreamReservation> {
    if (!(await slots.take(operator.sub))) throw new TooManyStreams(String(max))
    return new StreamReservation(slots, operator)
  }

  /** Whether the slot is still held. */
  get held(): boolean {
    return this.#held
  }

  /** Gives the slot back; later calls do nothing. */
  release(): void {
    if (!this.#held) return
    this.#held = false
    this.#slots.give(this.operator.sub)
  }
}
