import { randomBytes } from 'node:crypto'
import { AttachmentStore } from './attachments.ts'
import { Credentials } from './credentials.ts'
import { CLOSED_FRAME, EventStreams, runComment } from './event-streams.ts'
import { endRunInbox, exitLoop, schedulePump } from './inbox.ts'
import type { ActionRecord, LoopState, MessageRecord, RequestRecord } from './records.ts'
import { createRequest, DEFAULT_DEADLINE_S, type NewRequest } from './requests.ts'
import { TimerSet } from './timers.ts'
import { RunTrace, type TraceEvent } from './trace.ts'

/** Everything the core needs, with defaults already applied (see index.ts for the public options). */
export interface CoreOptions {
  kasmId: string
  replayEvents: number
  pingIntervalMs: number
  inboxMessageChars: number
  attachmentBytes: number
  consumer: 'loop' | 'external'
  deliveryStepMs: number
  observeTokenRequired: boolean
  /** runner.escalation_pause_s: how long a handoff pause lasts unless a person finishes it. */
  escalationPauseS: number
  /** Request field types of a newer release, accepted in definitions (see protocol/fields.ts). */
  futureFieldTypes: ReadonlySet<string>
  /** Redaction rules (global regular expressions) applied to reply values before they are checked. */
  redactPatterns: readonly RegExp[]
  messagingToken?: string
  sessionToken?: string
}

/** One run: its trace and its inbox (messages, requests, actions), which a new run replaces. */
export class RunState {
  readonly trace: RunTrace
  /** The inbox revision: bumped by every message stored or changed. */
  rev = 0
  readonly messages: MessageRecord[] = []
  readonly messagesById = new Map<string, MessageRecord>()
  /** Idempotency: `<sender>\0<key>` → the message stored under it. */
  readonly messageKeys = new Map<string, MessageRecord>()
  readonly requests = new Map<string, RequestRecord>()
  readonly requestDeadlines = new Map<string, () => void>()
  requestSeq = 0
  readonly actions: ActionRecord[] = []
  readonly actionKeys = new Map<string, ActionRecord>()
  stepSeq = 0
  /** Model calls of the agentic loop so far (the `n` of iteration events). */
  iterationSeq = 0
  /** Set when the run ended: later messages are stored as undelivered, requests refused. */
  inboxClosed = false
  /** The agentic loop has exited (stopped, or escalated): later messages cannot be delivered. */
  loopExited = false
  /** The tool in flight while a stop waits for it. */
  stoppingTool: string | null = null
  escalationStartedAt: number | null = null
  /** Why the run escalated, while its handoff pause lasts. */
  escalationReason: string | null = null
  /** Ends the pause when runner.escalation_pause_s has passed. */
  escalationTimer: (() => void) | null = null

  constructor(run: string, replayEvents: number) {
    this.trace = new RunTrace(run, replayEvents)
  }

  get run(): string {
    return this.trace.run
  }
}

/** Callbacks for the demo's autoplay; tests never need them. */
export interface CoreHooks {
  onLoopExit?(reason: 'stopped' | 'handoff'): void
  onMessage?(message: MessageRecord): void
  onRequestClosed?(request: RequestRecord): void
}

function newRunId(): string {
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')
  return `run-${stamp}-${randomBytes(3).toString('hex')}`
}

/**
 * The state of one simulated runtime: the current run, tokens, open streams, uploads and timers. Routes and
 * the public facade call into it; inbox.ts, requests.ts and actions.ts hold the inbox rules.
 */
export class RuntimeCore {
  readonly options: CoreOptions
  readonly epoch = `ep-${randomBytes(6).toString('hex')}`
  readonly timers = new TimerSet()
  readonly credentials: Credentials
  readonly streams: EventStreams
  readonly attachments = new AttachmentStore()
  /** Every message ever stored, by `<run>\0<sender>\0<key>`: GET runs/<run>/messages/<key> outlives its run. */
  readonly history = new Map<string, MessageRecord>()
  readonly hooks: CoreHooks = {}
  /** Fields merged into every info event (autoplay sets a goal, for instance). */
  infoExtra: Record<string, unknown> = {}
  loop: LoopState
  /** Cancels the scheduled inbox pump, when one is scheduled. */
  pumpCancel: (() => void) | null = null
  private messageSeq = 0
  private actionSeq = 0
  private state: RunState

  constructor(options: CoreOptions) {
    this.options = options
    this.credentials = new Credentials(options, options.observeTokenRequired)
    this.streams = new EventStreams(this.timers, options.pingIntervalMs)
    this.loop = options.consumer === 'loop' ? 'running' : 'idle'
    this.state = new RunState(newRunId(), options.replayEvents)
    this.emit('info', this.info())
  }

  /** The run being served. */
  get current(): RunState {
    return this.state
  }

  get run(): string {
    return this.state.run
  }

  nextMessageId(): string {
    return `m${++this.messageSeq}`
  }

  nextActionId(): string {
    return `a${++this.actionSeq}`
  }

  /** Appends to the current trace and sends the frame to every open stream. Throws once the trace ended. */
  emit(type: string, payload?: unknown): TraceEvent {
    const event = this.state.trace.append(type, payload)
    this.streams.broadcast(event.frame)
    return event
  }

  /** Emits on `run`'s trace only if it is the current run and still open (inbox side effects after the end). */
  emitFor(run: RunState, type: string, payload: unknown): void {
    if (run === this.state && run.trace.ending === 'open') this.emit(type, payload)
  }

  /** Emits a transcript row with the run's next step number. */
  step(run: RunState, row: Record<string, unknown>): void {
    if (run !== this.state || run.trace.ending !== 'open') return
    this.emit('step', { n: ++run.stepSeq, duration_ms: 0, ...row })
  }

  /** A complete info snapshot for the current run. */
  info(): Record<string, unknown> {
    const loop = this.options.consumer === 'loop'
    return {
      run_id: this.state.run,
      mode: loop ? 'run' : 'mcp',
      app: 'simulated-app',
      version: 'simulated',
      kasm_id: this.options.kasmId,
      display: ':1',
      agentic: loop,
      max_iterations: loop ? 40 : 0,
      plan_steps: 0,
      cdp: false,
      vision: false,
      tool_set: loop ? 'desktop' : 'mcp',
      operator_config: {
        evidence: {
          trace_replay_events: this.options.replayEvents,
          inbox_message_chars: this.options.inboxMessageChars,
          inbox_attachment_bytes: this.options.attachmentBytes,
        },
        runner: {
          ask_human_timeout_s: DEFAULT_DEADLINE_S,
          escalation_pause_s: this.options.escalationPauseS,
        },
      },
      input_observation: false,
      ...this.infoExtra,
    }
  }

  /**
   * Starts a new run: the old run's inbox ends (pending messages undelivered, open requests run_ended),
   * open streams get a `: run <id>` line, and the new trace starts with an info event.
   */
  newRun(): string {
    endRunInbox(this, this.state, 'a new run started before a model request carried it')
    this.state = new RunState(newRunId(), this.options.replayEvents)
    this.loop = this.options.consumer === 'loop' ? 'running' : 'idle'
    this.streams.broadcast(runComment(this.state.run))
    this.emit('info', this.info())
    return this.state.run
  }

  /** Ends the current trace: with `done`, or closed (streams get `event: closed` and end). */
  closeTrace(opts: { done?: boolean } = {}): void {
    const run = this.state
    if (run.trace.ending !== 'open') return
    endRunInbox(this, run, 'the run ended before a model request carried it')
    this.loop = 'idle'
    if (opts.done === true) {
      this.emit('done')
      return
    }
    run.trace.close()
    this.streams.endAll(CLOSED_FRAME)
  }

  /** Sets the loop's state; leaving `running` for an escalation exits the loop, as the runtime's does. */
  setLoop(state: LoopState): void {
    const run = this.state
    const previous = this.loop
    this.loop = state
    if (state === 'running') {
      run.loopExited = false
      schedulePump(this)
    } else {
      run.stoppingTool = null
    }
    if (state === 'escalation' && previous !== 'escalation') {
      run.escalationStartedAt = Date.now()
      exitLoop(this, run, 'the loop exited for a handoff before a model request carried it')
    }
    if (state !== 'escalation') {
      run.escalationTimer?.()
      run.escalationTimer = null
    }
  }

  /**
   * The agent calls escalate, as the runtime's loop does: the model call (an iteration with the escalate tool
   * call), a status saying so, then the handoff pause. The verdict is fixed at the call (test-error,
   * escalated); the pause ends after runner.escalation_pause_s with an escalation record `ended_by: timeout`,
   * or earlier by finish_handoff (`ended_by: operator`).
   */
  escalate(reason: string, pauseS = this.options.escalationPauseS): void {
    const run = this.state
    this.emit('iteration', {
      n: ++run.iterationSeq,
      content: `A person has to take over: ${reason}.`,
      tool_calls: [{ name: 'escalate', args: { reason } }],
      usage: { input_tokens: 2900, output_tokens: 70 },
      model_ms: 910,
    })
    this.emit('status', {
      phase: 'agentic',
      detail: `escalated: waiting for a person (press "I'm done, finish" when finished): ${reason}`,
    })
    run.escalationReason = reason
    this.setLoop('escalation')
    run.escalationTimer = this.timers.after(pauseS * 1000, () => {
      run.escalationTimer = null
      if (run === this.state && this.loop === 'escalation') this.endEscalation(run, 'timeout')
    })
  }

  /** The handoff pause ends: the escalation record, then the loop is idle (a handoff never resumes it). */
  endEscalation(run: RunState, endedBy: 'operator' | 'timeout'): void {
    const started = run.escalationStartedAt ?? Date.now()
    const shots = [...run.trace.screenshots]
    this.emitFor(run, 'escalation', {
      reason: run.escalationReason ?? 'a person took over the session',
      paused_s: Math.round((Date.now() - started) / 100) / 10,
      before: shots.at(-1) ?? null,
      after: shots.at(-1) ?? null,
      ended_by: endedBy,
    })
    run.escalationStartedAt = null
    run.escalationReason = null
    this.setLoop('idle')
    this.hooks.onLoopExit?.('handoff')
  }

  /** Asks a typed question as the agent's ask_human tool. Throws (an HttpError) when the fields are invalid. */
  ask(request: NewRequest): RequestRecord {
    return createRequest(this, request, 'agent')
  }

  /** Closes every stream and timer. */
  close(): void {
    this.timers.close()
    this.streams.drop()
  }
}
