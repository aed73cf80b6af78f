import type { Session, UnreadableSession } from './types.ts'

/**
 * Where registered sessions live: in memory (one replica) or Redis (a cluster, tokens encrypted at rest).
 * The registry owns every rule (validation, versions, sources); a store only keeps and announces.
 */
export interface SessionStore {
  get(kasmId: string): Promise<Session | undefined>
  /**
   * The session as this replica holds it, without waiting; undefined when it is not held here or the store
   * is not loaded yet (then {@link SessionStore.get} says). The request path asks this first: no promise.
   */
  peek(kasmId: string): Session | undefined
  /** Every session, in no particular order. */
  list(): Promise<Session[]>
  /** Stores or replaces the session under its `kasmId`, then notifies subscribers. */
  put(session: Session): Promise<void>
  /** Removes the session; false when there was none. Subscribers are notified only when one was removed. */
  remove(kasmId: string): Promise<boolean>
  /**
   * Calls `listener` after every change to a session, made through this store or (for a shared store)
   * by another replica. Returns the unsubscribe function.
   */
  subscribe(listener: (kasmId: string) => void): () => void
  /** Records that cannot be opened with the configured keys; always none for a store that seals nothing. */
  unreadable(): Promise<UnreadableSession[]>
  /** Deletes an unreadable record (compare-and-delete); false when there is none. */
  dropUnreadable(kasmId: string): Promise<boolean>
  /**
   * Throws RegistryUnreadable while the store holds records it cannot open: what it would write is sealed
   * with keys other replicas may lack. Never throws for a store that seals nothing.
   */
  assertWritable(): void
  /** Resolves when the store is usable; throws with a reason otherwise (readiness). */
  ready(): Promise<void>
  /** Frees connections and listeners. */
  close(): Promise<void>
}
