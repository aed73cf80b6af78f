import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { answerOf, handoffEndOf } from '../audit/answers.ts'
import type { AuditLog, AuditRecord } from '../audit/types.ts'
import { VIAS, type Via } from '../audit/types.ts'
import { escalationField, parseEscalationState } from '../escalation/state.ts'
import type { SessionRegistry } from '../sessions/types.ts'
import type { SessionBoard } from '../summary/board.ts'
import type { OpenRequest, Transition } from '../summary/types.ts'
import { handoffEnd, questionEnd, type ReportMetrics } from './metrics.ts'
import {
  type HandoffRecord,
  type OpenedRecord,
  type QuestionRecord,
  type ReportStore,
  stepLabel,
} from './types.ts'

/** What {@link ReportRecorder} works with. */
export interface ReportRecorderOptions {
  readonly store: ReportStore
  readonly audit: AuditLog
  readonly sessions: SessionRegistry
  /** Whether this replica reads the session now (holds its reader lease): the reader writes at once. */
  readonly reading: (kasmId: string) => boolean
  readonly metrics: ReportMetrics
  /** The session board, where each question's escalation record says which steps went out (absent: none). */
  readonly board?: SessionBoard
  /**
   * How long a replica that folds a session another replica reads keeps a transition before writing it
   * itself (the reader may fold nothing: its viewers read the events, no summary): a few lease times.
   */
  readonly graceMs: number
  readonly log: FastifyBaseLogger
  /** True while the store is known to be away (a Redis outage): its failures log at debug. */
  readonly quiet?: () => boolean
  /**
   * Delays before each look-up of who answered in the audit log: the runtime announces the closing before the
   * gateway has answered the reply (and, in a cluster, written its record). Default 250 ms, 1 s, 3 s.
   */
  readonly lookupDelaysMs?: readonly number[]
}

/** A transition worth a record or a count, and when it happened (ms). */
interface Job {
  readonly kasmId: string
  readonly t: Extract<Transition, { type: 'request.opened' | 'request.closed' | 'escalation.ended' }>
  readonly when: number
}

const LOOKUP_DELAYS_MS = [250, 1000, 3000]
/** Store writes are tried this many times, this far apart, before the record is given up (and logged). */
const STORE_RETRY_MS = [0, 1000, 5000]
/** Transitions held per session while another replica reads it. */
const MAX_PENDING = 200
/** Records being written at once; beyond it a transition is dropped (and logged), never queued unbounded. */
const MAX_IN_FLIGHT = 1000
/** Teams remembered for sessions already removed when their last transitions are written. */
const MAX_TEAMS = 10_000
const TITLE_CHARS = 200
const NAME_CHARS = 100
const SUB_CHARS = 200
const ENDED_BY_CHARS = 40

/** `value` clipped to `max` characters (an ellipsis says so). */
function clip(value: string, max: number): string {
  const chars = [...value]
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : value
}

function isoOr(value: string | null, fallback: string): string {
  const ms = Date.parse(value ?? '')
  return Number.isNaN(ms) ? fallback : new Date(ms).toISOString()
}

/** What the records of a question's opening and of its closing share; `word` starts the record's id. */
function questionOf(
  word: 'opened' | 'question',
  team: string,
  kasmId: string,
  run: string,
  request: OpenRequest,
) {
  const { requestId, title, deadline } = request
  const id = JSON.stringify([word, kasmId, run, requestId])
  return { id, team, kasmId, run, requestId, title: clip(title, TITLE_CHARS), deadline }
}

function viaOfRecord(record: AuditRecord | undefined): Via | 'unknown' {
  const via = record?.via
  return via !== undefined && (VIAS as readonly string[]).includes(via) ? via : 'unknown'
}

/**
 * Turns the summary transitions of every session this replica folds into the team report: a record per closed
 * question and per ended handoff (who answered and through what from the audit log), and the report's metrics.
 *
 * Counted once across replicas: every write is claimed in the store by a key of its own (session, run,
 * question), and only the replica whose claim wins writes the record and counts it. The replica reading the
 * session goes first; one that folds it while another reads keeps the transition and writes it when it takes
 * the lease over (`readerStarted`) or, should the reader fold nothing, after `graceMs`; a claim already won
 * makes that a no-op. History is never counted: replayed transitions (a watch starting on stored events) and
 * those of events from before this process started (a reader's first connection gets the run's whole replay
 * buffer from the runtime) were counted when they happened, or by a replica that is gone.
 */
export class ReportRecorder {
  readonly #o: ReportRecorderOptions
  readonly #startedAt = Date.now()
  readonly #pending = new Map<string, Set<Job>>()
  readonly #timers = new Set<NodeJS.Timeout>()
  readonly #inFlight = new Set<Promise<void>>()
  readonly #teams = new Map<string, string>()
  readonly #abort = new AbortController()

  constructor(options: ReportRecorderOptions) {
    this.#o = options
  }

  /** Records being written now (tests, shutdown). */
  get inFlight(): number {
    return this.#inFlight.size
  }

  /** A transition of a session this replica summarises (see SessionSummaries.onTransition). */
  transition(kasmId: string, t: Transition, replay: boolean): void {
    if (this.#abort.signal.aborted || replay) return
    if (t.type !== 'request.opened' && t.type !== 'request.closed' && t.type !== 'escalation.ended') return
    const at = Date.parse(t.at ?? '')
    const when = Number.isNaN(at) ? Date.now() : at
    if (when < this.#startedAt) return
    const job: Job = { kasmId, t, when }
    if (this.#o.reading(kasmId)) this.#run(job)
    else this.#hold(job)
  }

  /** This replica started reading the session: it writes what it kept while another replica read. */
  readerStarted(kasmId: string): void {
    const held = this.#pending.get(kasmId)
    if (held === undefined) return
    this.#pending.delete(kasmId)
    for (const job of held) this.#run(job)
  }

  /** Stops: what is held is dropped (its reader writes it), writes under way finish or give up. */
  async close(): Promise<void> {
    this.#abort.abort()
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    this.#pending.clear()
    await Promise.allSettled([...this.#inFlight])
  }

  #hold(job: Job): void {
    let held = this.#pending.get(job.kasmId)
    if (held === undefined) {
      held = new Set()
      this.#pending.set(job.kasmId, held)
    }
    if (held.size >= MAX_PENDING) {
      const oldest = held.values().next().value as Job
      held.delete(oldest)
    }
    held.add(job)
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      const now = this.#pending.get(job.kasmId)
      if (now === undefined || !now.delete(job)) return
      if (now.size === 0) this.#pending.delete(job.kasmId)
      this.#run(job)
    }, this.#o.graceMs)
    timer.unref()
    this.#timers.add(timer)
  }

  #run(job: Job): void {
    if (this.#abort.signal.aborted) return
    if (this.#inFlight.size >= MAX_IN_FLIGHT) {
      this.#o.log.warn(
        { kasmId: job.kasmId, type: job.t.type },
        'report: too many records in flight; one dropped',
      )
      return
    }
    const done: Promise<void> = this.#record(job)
      .catch((err: unknown) => {
        if (this.#abort.signal.aborted) return
        const level = this.#o.quiet?.() ? 'debug' : 'warn'
        this.#o.log[level]({ err, kasmId: job.kasmId, type: job.t.type }, 'report record not written')
      })
      .finally(() => this.#inFlight.delete(done))
    this.#inFlight.add(done)
  }

  async #record(job: Job): Promise<void> {
    const team = await this.#teamOf(job.kasmId)
    if (team === null) return
    const { metrics, store } = this.#o
    metrics.initialise(team)
    const { kasmId, t } = job
    // When the transition happened: the question's opening, or the closing or end of what it closes.
    const at = new Date(job.when).toISOString()
    if (t.type === 'request.opened') {
      const opened: OpenedRecord = {
        kind: 'opened',
        ...questionOf('opened', team, kasmId, t.run, t.request),
        openedAt: at,
      }
      if (await this.#stored(() => store.add(opened))) metrics.opened.inc({ team })
      return
    }
    if (t.type === 'request.closed') {
      const closedBy = questionEnd(t.closedBy)
      const requestId = t.request.requestId
      const step = await this.#stepOf(kasmId, t.run, requestId)
      const answer =
        closedBy === 'reply'
          ? await this.#lookUp(() => answerOf(this.#o.audit, { kasmId, run: t.run, requestId }))
          : undefined
      const record: QuestionRecord = {
        kind: 'question',
        ...questionOf('question', team, kasmId, t.run, t.request),
        openedAt: isoOr(t.openedAt, at),
        closedAt: at,
        closedBy,
        step,
        ...this.#who(answer, closedBy === 'reply'),
      }
      if (!(await this.#stored(() => store.add(record)))) return
      metrics.closed.inc({ team, closed_by: closedBy })
      if (closedBy !== 'reply') return
      const answered = Date.parse(record.closedAt)
      metrics.answerSeconds.observe(
        { team, via: record.via ?? 'unknown', step: stepLabel(step) },
        Math.max(0, answered - Date.parse(record.openedAt)) / 1000,
      )
      if (record.deadline !== null)
        metrics.deadlineLeft.observe({ team }, Math.max(0, Date.parse(record.deadline) - answered) / 1000)
      return
    }
    const endedBy = handoffEnd(t.endedBy, t.fromRecord)
    const ender =
      endedBy === 'operator'
        ? await this.#lookUp(() => handoffEndOf(this.#o.audit, { kasmId, run: t.run }))
        : undefined
    const openedAt = isoOr(t.startedAt, at)
    const record: HandoffRecord = {
      kind: 'handoff',
      // Per pause: a run may escalate more than once.
      id: JSON.stringify(['handoff', kasmId, t.run, t.startSeq]),
      team,
      kasmId,
      run: t.run,
      reason: clip(t.reason, TITLE_CHARS),
      openedAt,
      closedAt: at,
      endedBy,
      runtimeEndedBy: t.fromRecord ? clip(t.endedBy, ENDED_BY_CHARS) : null,
      waitS: t.pausedS ?? Math.max(0, Date.parse(at) - Date.parse(openedAt)) / 1000,
      ...this.#who(ender, endedBy === 'operator'),
    }
    if (!(await this.#stored(() => store.add(record)))) return
    metrics.handoffs.inc({ team, ended_by: endedBy })
    metrics.handoffWait.observe({ team }, record.waitS)
  }

  /**
   * The highest step of the question's escalation that went out, from its record on the board (read as the
   * question closes, before the record is let go); 0 when only the first notice went, when it had no
   * escalation, or when the board cannot be read (the report is not held up by it).
   */
  async #stepOf(kasmId: string, run: string, requestId: string): Promise<number> {
    if (this.#o.board === undefined) return 0
    let value: string | undefined
    try {
      value = (await this.#o.board.read(kasmId)).get(escalationField(run, requestId))
    } catch (err) {
      this.#o.log.debug({ err, kasmId }, 'report: escalation record unreadable; step 0')
      return 0
    }
    const state = value === undefined ? null : parseEscalationState(value)
    let highest = 0
    for (const s of state?.steps ?? [])
      if (s.state === 'sent' && Number.isInteger(s.step) && s.step > highest) highest = s.step
    return highest
  }

  /** Who closed it and through what: from the audit record, or unknown when a person did elsewhere. */
  #who(
    record: AuditRecord | undefined,
    byPerson: boolean,
  ): { sub: string | null; name: string | null; via: QuestionRecord['via'] } {
    if (!byPerson) return { sub: null, name: null, via: null }
    return {
      sub: record?.sub == null ? null : clip(record.sub, SUB_CHARS),
      name: record?.name === undefined ? null : clip(record.name, NAME_CHARS),
      via: viaOfRecord(record),
    }
  }

  /** The session's team now, or the last one seen (a session removed as its run ended). */
  async #teamOf(kasmId: string): Promise<string | null> {
    const session = await this.#o.sessions.get(kasmId)
    if (session === undefined) return this.#teams.get(kasmId) ?? null
    this.#teams.delete(kasmId)
    this.#teams.set(kasmId, session.team)
    if (this.#teams.size > MAX_TEAMS) this.#teams.delete(this.#teams.keys().next().value as string)
    return session.team
  }

  /** An audit look-up, tried after each of the delays until it finds something. */
  async #lookUp(find: () => Promise<AuditRecord | undefined>): Promise<AuditRecord | undefined> {
    for (const delay of this.#o.lookupDelaysMs ?? LOOKUP_DELAYS_MS) {
      await sleep(delay, undefined, { signal: this.#abort.signal })
      try {
        const found = await find()
        if (found !== undefined) return found
      } catch (err) {
        this.#o.log.debug({ err }, 'report: audit log unreadable; trying again')
      }
    }
    return undefined
  }

  /** A store call, tried again after a failure (Redis away for a moment); the last failure is thrown. */
  async #stored(write: () => Promise<boolean>): Promise<boolean> {
    let failure: unknown
    for (const delay of STORE_RETRY_MS) {
      if (delay > 0) await sleep(delay, undefined, { signal: this.#abort.signal })
      try {
        return await write()
      } catch (err) {
        failure = err
      }
    }
    throw failure
  }
}
