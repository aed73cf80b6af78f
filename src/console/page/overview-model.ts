import type { EscalationView } from '../../overview/escalations.ts'
import type { SessionSummary, UpstreamHealth } from '../../summary/types.ts'
import { base } from './api.ts'
import { setServerNow } from './format.ts'
import { type EventStream, openEventStream } from './sse.ts'

/** One session as the overview stream sends it (see src/overview/hub.ts). */
export interface OverviewEntry {
  readonly kasmId: string
  readonly team: string
  readonly health: UpstreamHealth
  readonly summary: SessionSummary | null
  /** Display names of the people with the session open. */
  readonly watchers: readonly string[]
  /** "I'm on it" marks by request id. */
  readonly claims: Readonly<Record<string, { name: string; at: string }>>
  /** Each open question's escalation steps by request id (absent from a gateway without them). */
  readonly escalations?: Readonly<Record<string, EscalationView>>
  /** The handoff pause's escalation steps, while it lasts. */
  readonly handoffSteps?: EscalationView | null
}

/** What changed in the model. */
export type OverviewChange =
  | { kind: 'entry'; entry: OverviewEntry; previous: OverviewEntry | undefined }
  | { kind: 'gone'; kasmId: string }
  | { kind: 'ready' }
  | { kind: 'connection'; live: boolean }

/**
 * Every session the person may see, kept up to date from the gateway's ONE overview stream (whatever the
 * number of sessions). The overview page, a session's header and the attention counter all read it.
 */
export class OverviewModel {
  readonly entries = new Map<string, OverviewEntry>()
  /** The first snapshot has arrived. */
  ready = false
  live = false
  readonly #listeners = new Set<(change: OverviewChange) => void>()
  readonly #stream: EventStream
  /** Sessions named since the stream (re)opened. */
  readonly #fresh = new Set<string>()

  constructor() {
    this.#stream = openEventStream(`${base}api/overview`, {
      open: () => {
        this.live = true
        // A new snapshot follows: what it does not name again went away while the stream was down.
        this.#fresh.clear()
        this.#emit({ kind: 'connection', live: true })
      },
      event: (e) => this.#receive(e.event ?? 'message', e.data),
      trouble: () => {
        this.live = false
        this.#emit({ kind: 'connection', live: false })
        return true
      },
    })
  }

  /** Stops the stream (signing out). */
  close(): void {
    this.#stream.close()
  }

  /** Calls `listener` after every change; returns the unsubscribe. */
  subscribe(listener: (change: OverviewChange) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #emit(change: OverviewChange): void {
    for (const listener of this.#listeners) listener(change)
  }

  #receive(type: string, data: string): void {
    let value: unknown
    try {
      value = JSON.parse(data)
    } catch {
      return
    }
    if (typeof value !== 'object' || value === null) return
    const body = value as Record<string, unknown>
    if (type === 'session' && typeof body.kasmId === 'string') {
      const entry = body as unknown as OverviewEntry
      const previous = this.entries.get(entry.kasmId)
      this.entries.set(entry.kasmId, entry)
      this.#fresh.add(entry.kasmId)
      this.#emit({ kind: 'entry', entry, previous })
    } else if (type === 'gone' && typeof body.kasmId === 'string') {
      this.entries.delete(body.kasmId)
      this.#emit({ kind: 'gone', kasmId: body.kasmId })
    } else if (type === 'ready') {
      if (typeof body.now === 'string') setServerNow(body.now)
      for (const kasmId of [...this.entries.keys()]) {
        if (this.#fresh.has(kasmId)) continue
        this.entries.delete(kasmId)
        this.#emit({ kind: 'gone', kasmId })
      }
      this.ready = true
      this.#emit({ kind: 'ready' })
    }
  }
}

/** How urgently a session needs a person: lower sorts first. */
export function urgency(entry: OverviewEntry): number {
  const s = entry.summary
  if (s === null) return 4
  if (s.openRequests.length > 0) return 0
  if (s.escalation !== null) return 1
  if (endedInError(s)) return 2
  return 3
}

/** A run that ended in error (the verdict test-error or error, or an escalated outcome). */
export function endedInError(s: SessionSummary): boolean {
  return (
    s.ended !== null && (s.verdict === 'test-error' || s.verdict === 'error' || s.outcome === 'escalated')
  )
}

/** The overview's order: open questions (soonest deadline first), handoffs, errors, then by last activity. */
export function compareEntries(a: OverviewEntry, b: OverviewEntry): number {
  const ua = urgency(a)
  const ub = urgency(b)
  if (ua !== ub) return ua - ub
  if (ua === 0) {
    const da = a.summary?.openRequests[0]?.deadline ?? '9999'
    const db = b.summary?.openRequests[0]?.deadline ?? '9999'
    if (da !== db) return da < db ? -1 : 1
  }
  const la = a.summary?.lastActivity ?? ''
  const lb = b.summary?.lastActivity ?? ''
  if (la !== lb) return la > lb ? -1 : 1
  return a.kasmId < b.kasmId ? -1 : 1
}

/** What a person can act on in a session: its open questions and its handoff pause. */
export function needs(entry: OverviewEntry): number {
  const s = entry.summary
  if (s === null) return 0
  return s.openRequests.length + (s.escalation === null ? 0 : 1)
}
