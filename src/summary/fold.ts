import type { StreamMessage } from '../protocol/events.ts'
import type {
  EscalationPause,
  EscalationRecord,
  LoopState,
  OpenRequest,
  Screenshot,
  SessionSummary,
  Transition,
} from './types.ts'

/**
 * Folds one session's events, in order, into its {@link SessionSummary}, and says what changed for people
 * ({@link Transition}s). Pure and synchronous, with no Node API: the gateway folds each watched session once
 * per replica, and the console's session view folds the stream it shows with the same code.
 *
 * Everything a runtime sends is hostile input: payloads are parsed only for the types the summary reads,
 * bounded in size, every string is clipped, and a payload that is not what the protocol says is ignored.
 */

/** One item of a session's event stream: the bus's messages, and the events the page parses from `/events`. */
export type FoldInput = StreamMessage

/** Longest text kept from a payload (titles, goals, reasons). */
const MAX_TEXT = 300
/** Open requests tracked per run; a run asking more at once is misbehaving, the oldest are kept. */
const MAX_OPEN_REQUESTS = 50
/** Fields listed per request. */
const MAX_FIELDS = 32
/** A payload larger than this is not parsed (it still counts as activity). */
const MAX_PARSED_BYTES = 1024 * 1024
/** Types whose payload the fold reads; an iteration only when it may carry an escalate call. */
const READ_TYPES = new Set([
  'info',
  'status',
  'request',
  'escalation',
  'screenshot',
  'action',
  'iteration',
  'done',
])
/** A screenshot path as the artifacts route can serve it: relative, no dot segments. */
const ARTIFACT_PATH = /^(?!.*(?:^|\/)\.)[A-Za-z0-9._/-]{1,200}$/
const NO_TRANSITIONS: readonly Transition[] = Object.freeze([])

type Json = Record<string, unknown>

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A payload string, single-line and clipped; null when it is not a non-empty string. */
function text(value: unknown, max = MAX_TEXT): string | null {
  if (typeof value !== 'string') return null
  // Control characters (a newline in a title, an escape sequence) become spaces: one line, nothing hidden.
  let flat = ''
  for (const ch of value) flat += ch < ' ' || ch === '\u007f' ? ' ' : ch
  flat = flat.trim()
  if (flat === '') return null
  const chars = [...flat]
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : flat
}

function finite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null
}

/** An ISO 8601 time as the runtime writes it, normalised; null when it does not parse. */
function isoTime(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 40) return null
  const ms = Date.parse(value)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

function bySoonest(a: OpenRequest, b: OpenRequest): number {
  if (a.deadline === b.deadline) return a.requestId < b.requestId ? -1 : 1
  if (a.deadline === null) return 1
  if (b.deadline === null) return -1
  return a.deadline < b.deadline ? -1 : 1
}

/** See the module comment. One instance per session; {@link reset} happens by itself when the run changes. */
export class SummaryFold {
  #run: string | null = null
  #seq = 0
  #app: string | null = null
  #goal: string | null = null
  #mode: string | null = null
  #agentic = false
  #pauseS: number | null = null
  #phase: string | null = null
  #loop: LoopState = 'none'
  #verdict: string | null = null
  #outcome: string | null = null
  #conclusion: string | null = null
  #ended: 'done' | 'closed' | null = null
  readonly #open = new Map<string, OpenRequest>()
  /** When each open request's `request.opened` came. */
  readonly #openedAt = new Map<string, string | null>()
  #escalation: EscalationPause | null = null
  /** The seq of the event that started the pause: with the run, the pause's key. */
  #escalationSeq = 0
  #lastEscalation: EscalationRecord | null = null
  #screenshot: Screenshot | null = null
  #lastActivity: string | null = null
  #revision = 0
  #snapshot: SessionSummary | null = null

  /**
   * Bumped by every change a person would notice; the time of the last activity alone does not bump it (a
   * busy run would otherwise republish on every event).
   */
  get revision(): number {
    return this.#revision
  }

  /** The run being folded. */
  get run(): string | null {
    return this.#run
  }

  /** The time of the last activity, as {@link snapshot} would say, without building a snapshot. */
  get lastActivity(): string | null {
    return this.#lastActivity
  }

  /** Folds one message; returns what changed for people (usually nothing). */
  apply(message: FoldInput): readonly Transition[] {
    let out: Transition[] | null = null
    const emit = (t: Transition): void => {
      out ??= []
      out.push(t)
    }
    if (message.run !== this.#run) this.#startRun(message.run, emit)
    if (message.kind === 'closed') {
      if (this.#ended === null) this.#end('closed', this.#seq, null, emit)
      return out ?? NO_TRANSITIONS
    }
    if (this.#ended !== null || message.seq <= this.#seq) return out ?? NO_TRANSITIONS
    this.#seq = message.seq
    this.#snapshot = null
    const worth = READ_TYPES.has(message.type) && message.data.length <= MAX_PARSED_BYTES
    const payload =
      worth && (message.type !== 'iteration' || message.data.includes('"escalate"'))
        ? parse(message.data)
        : null
    const at = payload === null ? activityTime(message.data) : isoTime(payload.ts)
    if (at !== null) this.#lastActivity = at
    if (payload !== null) this.#read(message.type, message.seq, payload, at, emit)
    return out ?? NO_TRANSITIONS
  }

  /** The summary now; the same object until the next change. */
  snapshot(): SessionSummary {
    this.#snapshot ??= {
      run: this.#run,
      seq: this.#seq,
      app: this.#app,
      goal: this.#goal,
      mode: this.#mode,
      phase: this.#phase,
      loop: this.#loop,
      verdict: this.#verdict,
      outcome: this.#outcome,
      conclusion: this.#conclusion,
      ended: this.#ended,
      openRequests: [...this.#open.values()].sort(bySoonest),
      escalation: this.#escalation,
      lastEscalation: this.#lastEscalation,
      screenshot: this.#screenshot,
      lastActivity: this.#lastActivity,
    }
    return this.#snapshot
  }

  #changed(): void {
    this.#revision++
    this.#snapshot = null
  }

  /** A new run: whatever the old one left open closes with it. */
  #startRun(run: string, emit: (t: Transition) => void): void {
    if (this.#run !== null && this.#ended === null) this.#end(null, this.#seq, null, emit)
    this.#run = run
    this.#seq = 0
    this.#app = this.#goal = this.#mode = this.#phase = null
    this.#agentic = false
    this.#pauseS = null
    this.#loop = 'none'
    this.#verdict = this.#outcome = this.#conclusion = null
    this.#ended = null
    this.#open.clear()
    this.#openedAt.clear()
    this.#escalation = null
    this.#lastEscalation = null
    this.#screenshot = null
    this.#changed()
  }

  /** The run ended (`done`, `closed`, or replaced when `how` is null). */
  #end(how: 'done' | 'closed' | null, seq: number, at: string | null, emit: (t: Transition) => void): void {
    const run = this.#run as string
    for (const request of this.#open.values()) {
      const openedAt = this.#openedAt.get(request.requestId) ?? null
      emit({ type: 'request.closed', run, seq, at, request, closedBy: 'run_ended', openedAt })
    }
    this.#open.clear()
    this.#openedAt.clear()
    this.#endPause(seq, at, null, null, emit)
    if (this.#loop !== 'none') this.#loop = 'exited'
    if (how !== null) {
      this.#ended = how
      emit({ type: 'run.ended', run, seq, at, verdict: this.#verdict, outcome: this.#outcome })
    }
    this.#changed()
  }

  /** The pause ends: by the runtime's escalation record (its `ended_by`), or (null) with the run. */
  #endPause(
    seq: number,
    at: string | null,
    recorded: string | null,
    pausedS: number | null,
    emit: (t: Transition) => void,
  ): void {
    const pause = this.#escalation
    if (pause === null) return
    this.#escalation = null
    const endedBy = recorded ?? 'run_ended'
    this.#lastEscalation = { reason: pause.reason, pausedS, endedBy }
    emit({
      type: 'escalation.ended',
      run: this.#run as string,
      seq,
      at,
      reason: pause.reason,
      endedBy,
      fromRecord: recorded !== null,
      startedAt: pause.startedAt,
      startSeq: this.#escalationSeq,
      pausedS,
    })
    this.#changed()
  }

  #read(type: string, seq: number, event: Json, at: string | null, emit: (t: Transition) => void): void {
    switch (type) {
      case 'info':
        this.#info(event.info)
        break
      case 'status':
        this.#status(event.status, seq, at, emit)
        break
      case 'request':
        this.#request(event.request, seq, at, emit)
        break
      case 'escalation':
        this.#escalationRecord(event.escalation, seq, at, emit)
        break
      case 'screenshot':
        this.#shot(event.screenshot)
        break
      case 'action':
        this.#action(event.action)
        break
      case 'iteration':
        this.#iteration(event.iteration, seq, at, emit)
        break
      case 'done':
        this.#end('done', seq, at, emit)
        break
    }
  }

  #info(info: unknown): void {
    if (!isRecord(info)) return
    // Each info is a complete snapshot, later fields winning: a field it leaves out keeps its value.
    this.#app = text(info.app, 100) ?? this.#app
    this.#goal = text(info.goal) ?? this.#goal
    this.#mode = text(info.mode, 20) ?? this.#mode
    if (typeof info.agentic === 'boolean') this.#agentic = info.agentic
    const runner = isRecord(info.operator_config) ? info.operator_config.runner : undefined
    const pause = isRecord(runner) ? finite(runner.escalation_pause_s) : null
    if (pause !== null && pause > 0) this.#pauseS = pause
    if (!this.#agentic) this.#loop = 'none'
    else if (this.#phase === 'agentic' && this.#loop === 'none') this.#loop = 'running'
    this.#changed()
  }

  #status(status: unknown, seq: number, at: string | null, emit: (t: Transition) => void): void {
    if (!isRecord(status)) return
    this.#phase = text(status.phase, 40) ?? this.#phase
    if (this.#phase === 'agentic' && this.#agentic && this.#loop === 'none') this.#loop = 'running'
    if (this.#phase === 'done') {
      this.#verdict = text(status.verdict, 40)
      this.#outcome = text(status.outcome, 40)
      this.#conclusion = text(status.summary, 500)
      if (this.#loop !== 'none') this.#loop = 'exited'
      this.#endPause(seq, at, null, null, emit)
    }
    this.#changed()
  }

  #request(request: unknown, seq: number, at: string | null, emit: (t: Transition) => void): void {
    if (!isRecord(request)) return
    const id = text(request.request_id, 100)
    if (id === null) return
    const run = this.#run as string
    const known = this.#open.get(id)
    if (request.state === 'open') {
      if (known === undefined && this.#open.size >= MAX_OPEN_REQUESTS) return
      const fields = Array.isArray(request.fields) ? request.fields.slice(0, MAX_FIELDS).filter(isRecord) : []
      const open: OpenRequest = {
        requestId: id,
        title: text(request.title) ?? id,
        deadline: isoTime(request.deadline),
        fieldIds: fields.map((f) => text(f.id, 64) ?? '?'),
        fieldTypes: fields.map((f) => text(f.type, 40) ?? '?'),
      }
      this.#open.set(id, open)
      if (known === undefined) {
        this.#openedAt.set(id, at)
        emit({ type: 'request.opened', run, seq, at, request: open })
      }
      this.#changed()
    } else if (request.state === 'closed' && known !== undefined) {
      const openedAt = this.#openedAt.get(id) ?? null
      this.#open.delete(id)
      this.#openedAt.delete(id)
      emit({
        type: 'request.closed',
        run,
        seq,
        at,
        request: known,
        closedBy: text(request.closed_by, 40) ?? 'closed',
        openedAt,
      })
      this.#changed()
    }
  }

  #escalationRecord(record: unknown, seq: number, at: string | null, emit: (t: Transition) => void): void {
    if (!isRecord(record)) return
    const endedBy = text(record.ended_by, 40) ?? 'unknown'
    const pausedS = finite(record.paused_s)
    if (this.#escalation === null) {
      // A record without a pause we saw start (it began before what the buffer still holds).
      this.#lastEscalation = { reason: text(record.reason) ?? 'escalated', pausedS, endedBy }
      this.#changed()
    } else {
      this.#endPause(seq, at, endedBy, pausedS, emit)
    }
    if (this.#loop !== 'none') this.#loop = 'exited'
  }

  #iteration(iteration: unknown, seq: number, at: string | null, emit: (t: Transition) => void): void {
    if (!isRecord(iteration) || !Array.isArray(iteration.tool_calls) || this.#escalation !== null) return
    const call = iteration.tool_calls.find((c) => isRecord(c) && c.name === 'escalate') as Json | undefined
    if (call === undefined) return
    const reason = (isRecord(call.args) ? text(call.args.reason) : null) ?? 'escalated'
    const startedAt = at ?? new Date().toISOString()
    const endsAt =
      this.#pauseS === null ? null : new Date(Date.parse(startedAt) + this.#pauseS * 1000).toISOString()
    this.#escalation = { reason, startedAt, endsAt }
    this.#escalationSeq = seq
    if (this.#loop !== 'none') this.#loop = 'exited'
    emit({ type: 'escalation.started', run: this.#run as string, seq, at, reason })
    this.#changed()
  }

  #shot(shot: unknown): void {
    if (!isRecord(shot) || typeof shot.file !== 'string' || !ARTIFACT_PATH.test(shot.file)) return
    this.#screenshot = {
      file: shot.file,
      step: finite(shot.step),
      width: finite(shot.width),
      height: finite(shot.height),
    }
    this.#changed()
  }

  #action(action: unknown): void {
    if (!isRecord(action) || action.action !== 'stop' || this.#loop === 'none') return
    if (action.state === 'accepted' && this.#loop === 'running') this.#loop = 'stopping'
    else if (action.state === 'stopped') this.#loop = 'exited'
    else return
    this.#changed()
  }
}

function parse(data: string): Json | null {
  try {
    const value: unknown = JSON.parse(data)
    return isRecord(value) ? value : null
  } catch {
    return null
  }
}

/** The `ts` of an event whose payload is not parsed: found near the start, where the runtime writes it. */
function activityTime(data: string): string | null {
  const match = /"ts"\s*:\s*"([^"]{1,40})"/.exec(data.slice(0, 300))
  return match === null ? null : isoTime(match[1])
}
