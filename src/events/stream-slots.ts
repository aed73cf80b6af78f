/**
 * The per-operator cap on open event streams (GATEWAY_MAX_STREAMS_PER_OPERATOR). Two implementations: this
 * replica's count (embedded mode) and a count shared by every replica through Redis (cluster mode), whose
 * entries expire when the replica holding them dies, so a crash never leaks an operator's slots.
 */
export interface StreamSlots {
  /** Takes one of `sub`'s slots; false when all are taken (on any replica). */
  take(sub: string): Promise<boolean>
  /** Gives back a slot {@link take} gave. */
  give(sub: string): void
  /** Gives back every slot this replica holds (shutdown) and stops its timers. */
  close(): Promise<void>
}

/** {@link StreamSlots} of one process. */
export class MemoryStreamSlots implements StreamSlots {
  readonly max: number
  readonly #held = new Map<string, number>()

  constructor(max: number) {
    this.max = max
  }

  async take(sub: string): Promise<boolean> {
    const held = this.#held.get(sub) ?? 0
    if (held >= this.max) return false
    this.#held.set(sub, held + 1)
    return true
  }

  give(sub: string): void {
    const now = (this.#held.get(sub) ?? 1) - 1
    if (now <= 0) this.#held.delete(sub)
    else this.#held.set(sub, now)
  }

  async close(): Promise<void> {
    this.#held.clear()
  }
}
