import type { SessionStore } from './store.ts'
import type { Session, UnreadableSession } from './types.ts'

/** The single-replica store: a map, with listeners called synchronously after each change. */
export class MemorySessionStore implements SessionStore {
  readonly #sessions = new Map<string, Session>()
  readonly #listeners = new Set<(kasmId: string) => void>()
  readonly #onListenerError: (err: unknown) => void

  /** `onListenerError` hears what a change listener threw (the plugin logs it). */
  constructor(onListenerError: (err: unknown) => void = () => {}) {
    this.#onListenerError = onListenerError
  }

  async get(kasmId: string): Promise<Session | undefined> {
    return this.#sessions.get(kasmId)
  }

  peek(kasmId: string): Session | undefined {
    return this.#sessions.get(kasmId)
  }

  async list(): Promise<Session[]> {
    return [...this.#sessions.values()]
  }

  async put(session: Session): Promise<void> {
    this.#sessions.set(session.kasmId, session)
    this.#notify(session.kasmId)
  }

  async remove(kasmId: string): Promise<boolean> {
    const removed = this.#sessions.delete(kasmId)
    if (removed) this.#notify(kasmId)
    return removed
  }

  subscribe(listener: (kasmId: string) => void): () => void {
    this.#listeners.add(listener)
    return () => void this.#listeners.delete(listener)
  }

  async unreadable(): Promise<UnreadableSession[]> {
    return []
  }

  async dropUnreadable(): Promise<boolean> {
    return false
  }

  assertWritable(): void {}

  async ready(): Promise<void> {}

  async close(): Promise<void> {
    this.#listeners.clear()
  }

  #notify(kasmId: string): void {
    for (const listener of this.#listeners) {
      // One faulty listener must not stop the others or fail the write that already happened.
      try {
        listener(kasmId)
      } catch (err) {
        this.#onListenerError(err)
      }
    }
  }
}
