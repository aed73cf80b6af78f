/**
 * Presence, the seam: who watches which session. {@link MemoryPresence} counts this replica's open viewer
 * streams; in a cluster `RedisPresence` adds the other replicas' published counts (chosen in src/stores).
 */

/** One open viewer stream as presence sees it (the events folder's ViewerStream has this shape). */
export interface WatchingViewer {
  readonly kasmId: string
  readonly operator: { readonly sub: string; readonly name?: string }
}

/** Where presence reads this replica's open viewer streams from (bound once the events plugin exists). */
export type ViewerSource = () => Iterable<WatchingViewer>

/** Who watches a session, over every replica. */
export interface PresenceView {
  kasmId: string
  /** Open event streams. */
  viewers: number
  /** Each operator with at least one open stream, with how many; sorted by `sub`. */
  operators: { sub: string; name?: string; viewers: number }[]
}

/**
 * Viewers and operators per session. Presence reads the replica's open viewer streams (nothing on the
 * event path has to report to it); in a cluster each replica also publishes its own counts to Redis with
 * an expiry, so a killed replica's viewers vanish from the view on their own.
 */
export interface Presence {
  /** Binds the replica's viewer streams (the stores plugin does, once the app is ready). */
  setSource(source: ViewerSource): void
  of(kasmId: string): Promise<PresenceView>
  /** Views of several sessions at once (one pass over the viewers, one round trip to Redis). */
  ofMany(kasmIds: readonly string[]): Promise<Map<string, PresenceView>>
  close(): Promise<void>
}

/** One replica's viewers of one session, per operator (what a replica publishes in a cluster). */
export type Counts = [sub: string, entry: { name?: string; viewers: number }][]

/** Groups viewers by session, then by operator. */
export function countBySession(viewers: Iterable<WatchingViewer>, only?: string): Map<string, Counts> {
  const bySession = new Map<string, Map<string, { name?: string; viewers: number }>>()
  for (const v of viewers) {
    if (only !== undefined && v.kasmId !== only) continue
    let ops = bySession.get(v.kasmId)
    if (!ops) {
      ops = new Map()
      bySession.set(v.kasmId, ops)
    }
    const entry = ops.get(v.operator.sub) ?? {
      viewers: 0,
      ...(v.operator.name ? { name: v.operator.name } : {}),
    }
    entry.viewers++
    ops.set(v.operator.sub, entry)
  }
  return new Map([...bySession].map(([k, ops]) => [k, [...ops]]))
}

/** The view of a session from the counts of each replica that has viewers of it. */
export function view(kasmId: string, parts: Iterable<Counts>): PresenceView {
  const merged = new Map<string, { sub: string; name?: string; viewers: number }>()
  for (const part of parts) {
    for (const [sub, { name, viewers }] of part) {
      const m = merged.get(sub) ?? { sub, viewers: 0 }
      m.viewers += viewers
      if (name && !m.name) m.name = name
      merged.set(sub, m)
    }
  }
  const operators = [...merged.values()].sort((a, b) => (a.sub < b.sub ? -1 : a.sub > b.sub ? 1 : 0))
  return { kasmId, viewers: operators.reduce((n, o) => n + o.viewers, 0), operators }
}

/** {@link Presence} of a single replica: counted on demand from the open streams. */
export class MemoryPresence implements Presence {
  #source: ViewerSource = () => []

  setSource(source: ViewerSource): void {
    this.#source = source
  }

  async of(kasmId: string): Promise<PresenceView> {
    return view(kasmId, countBySession(this.#source(), kasmId).values())
  }

  async ofMany(kasmIds: readonly string[]): Promise<Map<string, PresenceView>> {
    const counts = countBySession(this.#source())
    return new Map(kasmIds.map((k) => [k, view(k, counts.has(k) ? [counts.get(k) as Counts] : [])]))
  }

  async close(): Promise<void> {}
}
