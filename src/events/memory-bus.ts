import { MemoryBroker, type MemoryBrokerOptions } from './broker/memory.ts'
import type { BusMessage, ReaderLease } from './bus.ts'
import { HubBus } from './hub-bus.ts'

/** Options of {@link MemoryEventBus}. */
export type MemoryEventBusOptions = MemoryBrokerOptions

/**
 * The event bus of a single process: the {@link MemoryBroker} and this process's hub. A live event reaches
 * every subscriber's `deliver` in the same turn as the reader's `append`, and the same batch array (and the
 * same frame buffers) go to every subscriber that needs all of it.
 */
export class MemoryEventBus extends HubBus<number> {
  declare readonly broker: MemoryBroker

  constructor(options: MemoryEventBusOptions) {
    super(new MemoryBroker(options))
  }

  /** Sessions with a log, subscribers, stored events and bytes (tests assert bounds and that nothing leaks). */
  stats(kasmId?: string): { sessions: number; subscribers: number; stored: number; bytes: number } {
    const { sessions, stored, bytes } = this.broker.stats(kasmId)
    return { sessions, subscribers: this.hub.viewerCount(kasmId), stored, bytes }
  }

  /** {@link append} without the promise: the reader's hot path in a single process. */
  appendNow(kasmId: string, messages: readonly BusMessage[], fence: number): boolean {
    return this.broker.appendNow(kasmId, messages, fence)
  }
}

/**
 * The {@link ReaderLease} of a single process: every acquire succeeds with a higher fence, so a reader that
 * was replaced (restart after token rotation) can no longer append.
 */
export class MemoryReaderLease implements ReaderLease {
  #next = 1
  readonly #held = new Map<string, number>()

  async acquire(kasmId: string): Promise<number> {
    const fence = this.#next++
    this.#held.set(kasmId, fence)
    return fence
  }

  async renew(kasmId: string, fence: number): Promise<boolean> {
    return this.#held.get(kasmId) === fence
  }

  async release(kasmId: string, fence: number): Promise<void> {
    if (this.#held.get(kasmId) === fence) this.#held.delete(kasmId)
  }
}
