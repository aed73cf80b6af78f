/**
 * Hand-registered sessions (sessions file, `PUT` without `lifecycle: "kasm"`) that the Kasm sync did not find
 * in Kasm: flagged, never removed. The sync's holder replaces the whole set after each successful run; every
 * replica's admin API reads it. In memory embedded, a Redis hash in a cluster (`RedisStaleSessions`); the
 * stores plugin chooses.
 */
export interface StaleSessions {
  /** kasmId -> since when (ISO 8601). */
  all(): Promise<Map<string, string>>
  replace(stale: ReadonlyMap<string, string>): Promise<void>
}

/** {@link StaleSessions} of a single replica. */
export class MemoryStaleSessions implements StaleSessions {
  #stale = new Map<string, string>()

  async all(): Promise<Map<string, string>> {
    return new Map(this.#stale)
  }

  async replace(stale: ReadonlyMap<string, string>): Promise<void> {
    this.#stale = new Map(stale)
  }
}
