import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import { endRevoked, recheckHolders } from '../auth/held-credentials.ts'
import { type Operator, seesTeam } from '../auth/operator.ts'
import type { Presence } from '../events/presence.ts'
import { Heartbeat } from '../events/sse.ts'
import type { StreamReservation } from '../events/stream-reservation.ts'
import type { SessionRegistry } from '../sessions/types.ts'
import type { SessionBoard } from '../summary/board.ts'
import type { SessionSummaries, SummaryListener, SummaryPublication } from '../summary/summaries.ts'
import type { Transition } from '../summary/types.ts'
import { type Claim, type Claims, claimsIn } from './claims.ts'
import { type EscalationView, escalationsIn } from './escalations.ts'
import { type OverviewEnd, OverviewStream } from './stream.ts'

/** Limits and intervals of the overview (from the environment; tests shorten them). */
export interface OverviewLimits {
  readonly maxQueuedBytes: number
  readonly pingIntervalMs: number
  readonly authRecheckMs: number
  /** How often who watches each shown session is asked again. */
  readonly presenceIntervalMs: number
  /** How long a session's summary is kept after the last overview showing it closed (a reload reuses it). */
  readonly lingerMs: number
}

/** What {@link OverviewHub} works with. */
export interface OverviewHubOptions {
  readonly sessions: SessionRegistry
  readonly summaries: SessionSummaries
  readonly presence: Presence
  readonly claims: Claims
  readonly board: SessionBoard
  readonly stillValid: (operator: Operator) => Promise<boolean>
  readonly limits: OverviewLimits
  readonly log: FastifyBaseLogger
}

/** One session shown on this replica's overviews: its latest frame, prepared once for every stream. */
interface Entry {
  readonly kasmId: string
  team: string
  /** Streams showing it. */
  streams: number
  publication: SummaryPublication | null
  /** Display names of the people with the session open, sorted. */
  watchers: readonly string[]
  claims: ReadonlyMap<string, Claim>
  /** Escalation records of the run's questions (by request id) and of its handoff pause (`escalation`). */
  escalations: ReadonlyMap<string, EscalationView>
  stop: () => void
  linger: NodeJS.Timeout | null
}

/** The public shape of a claim in a frame: who and since when, never the holder's id. */
interface ClaimView {
  name: string
  at: string
}

/** `event: session` with everything a stream shows of the session. */
function sessionFrame(entry: Entry): Buffer {
  const summary = entry.publication?.summary
  const open = new Set(summary?.openRequests.map((r) => r.requestId) ?? [])
  const claims: Record<string, ClaimView> = {}
  for (const [requestId, c] of entry.claims)
    if (open.has(requestId)) claims[requestId] = { name: c.name, at: c.at }
  const escalations: Record<string, EscalationView> = {}
  for (const [item, view] of entry.escalations) if (open.has(item)) escalations[item] = view
  const pause = summary?.escalation == null ? undefined : entry.escalations.get(HANDOFF_ITEM)
  return frame('session', {
    kasmId: entry.kasmId,
    team: entry.team,
    health: entry.publication?.health ?? 'unknown',
    summary: summary ?? null,
    watchers: entry.watchers,
    claims,
    escalations,
    handoffSteps: pause ?? null,
  })
}

/** The item of a handoff pause's escalation record (see src/escalation/state.ts). */
const HANDOFF_ITEM = 'escalation'

function frame(event: string, data: unknown): Buffer {
  return Buffer.from(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i])
}

/**
 * The overview of every session a person may see, for every person watching it on this replica: one SSE
 * stream each (whatever the number of sessions), fed by the {@link SessionSummaries}. Each session's frame
 * (summary, reader health, who has it open, "I'm on it" marks) is prepared once per change and written to
 * every stream allowed to see the session's team; a summary carries nothing a `viewer` could not read, so
 * roles need no separate frames. The summaries are watched while a stream shows them, and a while after.
 */
export class OverviewHub {
  readonly #o: OverviewHubOptions
  /** The open streams, each with the stream reservation it owns (released when it ends). */
  readonly #streams = new Map<OverviewStream, StreamReservation>()
  readonly #entries = new Map<string, Entry>()
  readonly #heartbeat: Heartbeat
  readonly #offSessions: () => void
  readonly #offBoard: () => void
  #presenceTimer: NodeJS.Timeout | null = null
  #authTimer: NodeJS.Timeout | null = null
  #polling = false
  #authCheckRunning = false
  #closing = false

  constructor(options: OverviewHubOptions) {
    this.#o = options
    this.#heartbeat = new Heartbeat(options.limits.pingIntervalMs)
    this.#offSessions = options.sessions.onChange((kasmId) => {
      void this.#sessionChanged(kasmId).catch((err: unknown) =>
        options.log.error({ err, kasmId }, 'overview update after a session change failed'),
      )
    })
    this.#offBoard = options.board.onChange((kasmId) => {
      const entries = kasmId === null ? [...this.#entries.values()] : [this.#entries.get(kasmId)]
      for (const entry of entries) if (entry !== undefined) void this.#loadBoard(entry)
    })
  }

  /** Open streams and shown sessions (tests and metrics: nothing may outlive its use). */
  stats(): { streams: number; sessions: number; timers: number } {
    let timers = this.#heartbeat.running ? 1 : 0
    if (this.#presenceTimer !== null) timers++
    if (this.#authTimer !== null) timers++
    for (const e of this.#entries.values()) if (e.linger !== null) timers++
    return { streams: this.#streams.size, sessions: this.#entries.size, timers }
  }

  /**
   * Opens a person's overview on a taken-over socket: a snapshot of every session they may see, then live.
   * The stream owns `reservation` from here on and releases it when it ends.
   */
  async open(reservation: StreamReservation, socket: Socket, requestId: string): Promise<OverviewStream> {
    const operator = reservation.operator
    const stream = new OverviewStream(socket, operator, requestId, this.#o.limits.maxQueuedBytes, (s, why) =>
      this.#streamGone(s, why),
    )
    this.#streams.set(stream, reservation)
    this.#heartbeat.add(stream)
    this.#ensureTimers()
    if (this.#closing) {
      stream.end('shutdown')
      return stream
    }
    const views = await this.#o.sessions.list()
    if (stream.ended) return stream
    const frames: Buffer[] = []
    for (const view of views) {
      if (!seesTeam(operator, view.team) || stream.sessions.has(view.kasmId)) continue
      const entry = this.#show(view.kasmId, view.team)
      stream.sessions.add(view.kasmId)
      frames.push(sessionFrame(entry))
    }
    frames.push(frame('ready', { now: new Date().toISOString() }))
    stream.sendAll(frames)
    return stream
  }

  /**
   * Ends at once the overviews of these cookie sessions (by id hash), revoked on this replica or another, as
   * `SessionStreams.endCookieSessions` does for event streams. Returns how many ended.
   */
  endCookieSessions(idHashes: readonly string[]): number {
    return endRevoked(this.#streams.keys(), idHashes)
  }

  /** Checks every overview's credential now (revocations may have been missed while Redis was away). */
  recheckCredentials(): Promise<void> {
    return this.#recheckAuth()
  }

  /** Ends every stream cleanly (they reconnect to another replica) and stops every summary watch. */
  async close(): Promise<void> {
    this.#closing = true
    this.#offSessions()
    this.#offBoard()
    for (const stream of this.#streams.keys()) stream.end('shutdown')
    this.#heartbeat.stop()
    this.#clearTimers()
    for (const entry of this.#entries.values()) {
      if (entry.linger !== null) clearTimeout(entry.linger)
      entry.stop()
    }
    this.#entries.clear()
  }

  /** The entry of a session, watched from now on for one more stream. */
  #show(kasmId: string, team: string): Entry {
    let entry = this.#entries.get(kasmId)
    if (entry === undefined) {
      const created: Entry = {
        kasmId,
        team,
        streams: 0,
        publication: null,
        watchers: [],
        claims: new Map(),
        escalations: new Map(),
        stop: () => {},
        linger: null,
      }
      entry = created
      this.#entries.set(kasmId, created)
      const listener: SummaryListener = {
        summary: (publication) => {
          const runChanged = publication.summary.run !== created.publication?.summary.run
          created.publication = publication
          this.#refresh(created)
          if (runChanged) void this.#loadBoard(created)
        },
        transition: (id, t, replay) => this.#transition(id, t, replay),
      }
      created.stop = this.#o.summaries.watch(kasmId, listener)
    }
    if (entry.linger !== null) {
      clearTimeout(entry.linger)
      entry.linger = null
    }
    entry.streams++
    return entry
  }

  /** One stream fewer shows the session; with none left the summary is kept a while, then let go. */
  #unshow(entry: Entry): void {
    entry.streams--
    if (entry.streams > 0 || entry.linger !== null) return
    const drop = (): void => {
      entry.linger = null
      if (entry.streams > 0) return
      entry.stop()
      if (this.#entries.get(entry.kasmId) === entry) this.#entries.delete(entry.kasmId)
    }
    if (this.#o.limits.lingerMs === 0 || this.#closing) drop()
    else {
      entry.linger = setTimeout(drop, this.#o.limits.lingerMs)
      entry.linger.unref()
    }
  }

  /** Builds the session's frame and writes it to every stream showing the session. */
  #refresh(entry: Entry): void {
    // Built for the streams showing it now and not kept (a stream that opens later builds its own): a busy
    // session republishes its activity every few seconds, and a kept frame per session is memory held for
    // nothing between two of them.
    let built: Buffer | null = null
    for (const stream of this.#streams.keys()) {
      if (!stream.sessions.has(entry.kasmId)) continue
      built ??= sessionFrame(entry)
      stream.send(built)
    }
  }

  #transition(kasmId: string, t: Transition, replay: boolean): void {
    // A closed question's mark goes with it (every replica showing the session tries; deleting is idempotent).
    if (replay || t.type !== 'request.closed') return
    this.#o.claims.clear(kasmId, t.run, t.request.requestId).catch((err: unknown) => {
      this.#o.log.warn({ err, kasmId }, 'mark of a closed question not cleared')
    })
  }

  /** Reads the session's board (one read): the "I'm on it" marks and escalation records of its run. */
  async #loadBoard(entry: Entry): Promise<void> {
    const run = entry.publication?.summary.run ?? null
    let fields: ReadonlyMap<string, string>
    try {
      fields = run === null ? new Map() : await this.#o.board.read(entry.kasmId)
    } catch (err) {
      this.#o.log.warn({ err, kasmId: entry.kasmId }, 'question marks unreadable')
      return
    }
    if (this.#entries.get(entry.kasmId) !== entry || run !== (entry.publication?.summary.run ?? null)) return
    const claims = run === null ? new Map<string, Claim>() : claimsIn(fields, run)
    const escalations = run === null ? new Map<string, EscalationView>() : escalationsIn(fields, run)
    const before = JSON.stringify([[...entry.claims], [...entry.escalations]])
    entry.claims = claims
    entry.escalations = escalations
    if (JSON.stringify([[...claims], [...escalations]]) !== before) this.#refresh(entry)
  }

  async #sessionChanged(kasmId: string): Promise<void> {
    if (this.#closing) return
    const session = await this.#o.sessions.get(kasmId)
    const entry = this.#entries.get(kasmId)
    if (session !== undefined && entry !== undefined && entry.team !== session.team) {
      entry.team = session.team
      this.#refresh(entry)
    }
    for (const stream of this.#streams.keys()) {
      const shown = stream.sessions.has(kasmId)
      const sees = session !== undefined && seesTeam(stream.operator, session.team)
      if (shown && !sees) {
        stream.sessions.delete(kasmId)
        stream.send(frame('gone', { kasmId }))
        const e = this.#entries.get(kasmId)
        if (e !== undefined) this.#unshow(e)
      } else if (!shown && sees && !stream.ended) {
        const e = this.#show(kasmId, session.team)
        stream.sessions.add(kasmId)
        stream.send(sessionFrame(e))
      }
    }
  }

  #streamGone(stream: OverviewStream, why: OverviewEnd): void {
    const reservation = this.#streams.get(stream)
    if (reservation === undefined) return
    this.#streams.delete(stream)
    this.#heartbeat.delete(stream)
    reservation.release()
    this.#o.log.debug({ why }, 'overview stream ended')
    for (const kasmId of stream.sessions) {
      const entry = this.#entries.get(kasmId)
      if (entry !== undefined) this.#unshow(entry)
    }
    stream.sessions.clear()
    if (this.#streams.size === 0) this.#clearTimers()
  }

  #ensureTimers(): void {
    const { presenceIntervalMs, authRecheckMs } = this.#o.limits
    if (this.#presenceTimer === null) {
      this.#presenceTimer = setInterval(() => void this.#pollPresence(), presenceIntervalMs)
      this.#presenceTimer.unref()
    }
    if (this.#authTimer === null) {
      this.#authTimer = setInterval(() => void this.#recheckAuth(), authRecheckMs)
      this.#authTimer.unref()
    }
  }

  #clearTimers(): void {
    if (this.#presenceTimer !== null) clearInterval(this.#presenceTimer)
    if (this.#authTimer !== null) clearInterval(this.#authTimer)
    this.#presenceTimer = null
    this.#authTimer = null
  }

  /** Who has each shown session open (presence counts viewer streams, on every replica in a cluster). */
  async #pollPresence(): Promise<void> {
    if (this.#polling || this.#entries.size === 0) return
    this.#polling = true
    try {
      const views = await this.#o.presence.ofMany([...this.#entries.keys()])
      for (const [kasmId, view] of views) {
        const entry = this.#entries.get(kasmId)
        if (entry === undefined) continue
        const names = [...new Set(view.operators.map((o) => o.name ?? o.sub))].sort()
        if (sameList(names, entry.watchers)) continue
        entry.watchers = names
        this.#refresh(entry)
      }
    } catch (err) {
      this.#o.log.debug({ err }, 'presence unavailable for the overview; asking again later')
    } finally {
      this.#polling = false
    }
  }

  /** Ends the streams whose credential expired or was revoked. */
  async #recheckAuth(): Promise<void> {
    if (this.#authCheckRunning) return
    this.#authCheckRunning = true
    try {
      await recheckHolders(
        this.#streams.keys(),
        (op) => this.#o.stillValid(op),
        (err) =>
          this.#o.log.warn({ err }, 'credential recheck failed; overview streams kept until the next check'),
      )
    } finally {
      this.#authCheckRunning = false
    }
  }
}
