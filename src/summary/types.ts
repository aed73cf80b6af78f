/**
 * The session summary: what a person must know about a session at a glance, folded from its event stream.
 * It carries no message text and no field values, only what any reader of the session (role `viewer`) may
 * see, so one summary serves every reader. The console's overview shows it; attention routing (webhooks)
 * reacts to its transitions.
 */

/** How the gateway's one reader of the session's runtime fares. */
export type UpstreamHealth =
  /** Nobody has reported yet (the reader is starting, or runs on another replica that has not said). */
  | 'unknown'
  /** The event stream is open. */
  | 'live'
  /** The runtime is not up yet (Kasm's proxy answers 502 while the session starts). */
  | 'not_up'
  /** The runtime refused the gateway's messaging token: an administrator must rotate it. */
  | 'token_refused'
  /** The runtime cannot be reached, or its stream keeps failing. */
  | 'unreachable'

/** A question the run waits on. */
export interface OpenRequest {
  readonly requestId: string
  readonly title: string
  /** ISO 8601, or null when the request carries none. */
  readonly deadline: string | null
  readonly fieldIds: readonly string[]
  /** Field types, in field order (the console knows whether it can render the form). */
  readonly fieldTypes: readonly string[]
}

/** A handoff pause: the run escalated and waits for a person to take the session. */
export interface EscalationPause {
  readonly reason: string
  /** ISO 8601: when the agent escalated. */
  readonly startedAt: string
  /** ISO 8601: when the pause ends by itself (runner.escalation_pause_s); null when unknown. */
  readonly endsAt: string | null
}

/** The last handoff pause of the run, once it ended. */
export interface EscalationRecord {
  readonly reason: string
  readonly pausedS: number | null
  /** `operator` (I'm done, finish), `timeout`, or what the runtime says. */
  readonly endedBy: string
}

/**
 * What the agentic loop does, as far as the events tell: `running` until a stop took effect (`stopping`
 * between the accepted stop and the loop's exit), `exited` after a stop, a handoff or the run's end; `none`
 * for a run without a loop (mcp mode) or before anything is known.
 */
export type LoopState = 'none' | 'running' | 'stopping' | 'exited'

/** The latest screenshot of the run: a file under the session's `artifacts/`. */
export interface Screenshot {
  readonly file: string
  readonly step: number | null
  readonly width: number | null
  readonly height: number | null
}

/** The summary of one session's current run. */
export interface SessionSummary {
  /** The run the summary is of; null before any event. */
  readonly run: string | null
  /** Sequence number of the last event folded. */
  readonly seq: number
  readonly app: string | null
  readonly goal: string | null
  /** `run` (a run with a goal) or `mcp`. */
  readonly mode: string | null
  /** The latest status phase (`boot`, `launch`, `steps`, `agentic`, `done`, or what a newer runtime sends). */
  readonly phase: string | null
  readonly loop: LoopState
  /** Set when the run is done. */
  readonly verdict: string | null
  readonly outcome: string | null
  /** The run's own summary line from its last status, when done. */
  readonly conclusion: string | null
  /** The run ended: `done`, or its trace closed without one. */
  readonly ended: 'done' | 'closed' | null
  /** Open questions, soonest deadline first. */
  readonly openRequests: readonly OpenRequest[]
  readonly escalation: EscalationPause | null
  readonly lastEscalation: EscalationRecord | null
  readonly screenshot: Screenshot | null
  /** ISO 8601: the time of the last event. */
  readonly lastActivity: string | null
}

/** How a request closed, as its `request` event says (`reply`, `timeout`, `cancelled`, `run_ended`). */
export type ClosedBy = string

/**
 * A change that may need a person, with the run and the seq of the event that caused it (a key for exactly-
 * once delivery) and that event's time (`at`, ISO 8601 as the runtime stamped it; null when the event carries
 * none, e.g. a trace closed without `done`). `request.closed` and `escalation.ended` also come when the run
 * ends or a new run starts; they carry when the question opened or the pause started, so a report can say how
 * long it waited.
 */
export type Transition =
  | {
      readonly type: 'request.opened'
      readonly run: string
      readonly seq: number
      readonly at: string | null
      readonly request: OpenRequest
    }
  | {
      readonly type: 'request.closed'
      readonly run: string
      readonly seq: number
      readonly at: string | null
      readonly request: OpenRequest
      readonly closedBy: ClosedBy
      /** When its `request.opened` came (ISO 8601), null when that event had no time. */
      readonly openedAt: string | null
    }
  | {
      readonly type: 'escalation.started'
      readonly run: string
      readonly seq: number
      readonly at: string | null
      readonly reason: string
    }
  | {
      readonly type: 'escalation.ended'
      readonly run: string
      readonly seq: number
      readonly at: string | null
      readonly reason: string
      /**
       * The runtime's `ended_by` (clipped; `unknown` when its record had none), or `run_ended` when the gateway
       * saw the run end first.
       */
      readonly endedBy: string
      /** Whether the runtime's escalation record ended it (false: the run's end, as the gateway saw it). */
      readonly fromRecord: boolean
      /** When the pause started (the escalate call), ISO 8601. */
      readonly startedAt: string
      /** The seq of the event that started it (the escalate call): with the run, the pause's key. */
      readonly startSeq: number
      /** The pause's length as the runtime's escalation record says; null when it ended without one. */
      readonly pausedS: number | null
    }
  | {
      readonly type: 'run.ended'
      readonly run: string
      readonly seq: number
      readonly at: string | null
      readonly verdict: string | null
      readonly outcome: string | null
    }
