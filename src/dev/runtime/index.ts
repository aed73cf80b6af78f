/**
 * A simulated kasm-session-runtime: the runtime side of the Sidebar protocol v1 (events, artifacts, the
 * inbox) served at the root of its own HTTP server, in memory, with switches for the failures a gateway must
 * survive. It is the gateway tests' upstream and the demo's session; it ships as the reference of the
 * runtime contract, so where the protocol is silent the choice is documented where it is made:
 *
 * - credentials and access: credentials.ts;  event streams, stalls and drops: event-streams.ts, routes/events.ts
 * - messages and delivery states: inbox.ts;  idempotency and the run check: envelope.ts
 * - requests and field validation: requests.ts, fields.ts;  control actions: actions.ts
 * - artifacts: artifacts.ts, routes/files.ts;  the demo's autoplay: autoplay.ts
 *
 * Run-wide choices: the epoch is fixed for the life of one simulated runtime (a new run keeps it); inbox
 * revisions, message sequences and request ids start afresh with each run; a trace that ended with `done`
 * keeps its streams open (a new run may follow in the same session), while one closed without `done` ends
 * them with `event: closed`; `emit` after the trace ended throws (call `newRun()`); `setDown` and `setHang`
 * affect new requests only (open streams carry on until `dropStreams()`), and requests held by a hang stay
 * unanswered until the client gives up or `close()`.
 */

import { storablePath } from './artifacts.ts'
import { type PlayName, startAutoplay } from './autoplay.ts'
import { type CoreOptions, RuntimeCore } from './core.ts'
import { HttpError } from './http-error.ts'
import type { LoopState } from './records.ts'
import { buildRuntimeApp, type ReceivedRequest, ServerControls } from './server.ts'

export type { ActionRecord, LoopState, MessageRecord, MessageState, RequestRecord } from './records.ts'
export type { ReceivedRequest } from './server.ts'

export interface SimulatedRuntimeOptions {
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
  /** KASM_RUNTIME_INBOX_TOKEN: the messaging token (sender `operator`). */
  messagingToken?: string
  /** KASM_RUNTIME_SESSION_TOKEN: the session token (sender `orchestrator`). */
  sessionToken?: string
  /** KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: every GET needs one of the tokens. */
  observeTokenRequired?: boolean
  /** Default 'demo'. */
  kasmId?: string
  /** evidence.trace_replay_events: the replay buffer. Default 4096. */
  replayEvents?: number
  /** Default 15000. */
  pingIntervalMs?: number
  /** evidence.inbox_message_chars. Default 4000. */
  inboxMessageChars?: number
  /** evidence.inbox_attachment_bytes. Default 8 MiB. */
  attachmentBytes?: number
  /** 'loop' (default): a run with a goal, the runtime's loop reads messages; 'external': mcp mode. */
  consumer?: 'loop' | 'external'
  /** Demo mode: emit a plausible run forever, one tick every `intervalMs` (2000), of `play` (`expenses`). */
  autoplay?: boolean | { intervalMs?: number; play?: PlayName }
  /** How long each delivery state lasts under consumer 'loop' (and half a stop's wait). Default 100. */
  deliveryStepMs?: number
  /** runner.escalation_pause_s: how long a handoff pause lasts. Default 600. */
  escalationPauseS?: number
  /**
   * Request field types of a newer protocol release (v1 is additive), e.g. `['date']`: `ask` accepts them
   * with any constraint, and a reply's value for them is only checked for presence. Default none.
   */
  futureFieldTypes?: readonly string[]
  /**
   * Redaction rules (regular expression sources) of the run's secrets settings: what they match in a reply's
   * values becomes `[REDACTED]` before the values are checked, so a value redaction would make invalid is
   * refused with 422, as the protocol says. Default none.
   */
  redactPatterns?: readonly string[]
}

export interface SimulatedRuntime {
  /** 'http://127.0.0.1:PORT/' (trailing slash). */
  readonly url: string
  /** The current run id. */
  readonly run: string
  readonly epoch: string
  /** Appends a trace line and pushes it to every open stream. Throws once the trace has ended. */
  emit(type: string, payload?: unknown): { seq: number; line: string }
  /** Starts a new run: fresh trace, buffer and inbox; emits an `info` event first. Returns the run id. */
  newRun(): string
  /** `done: true` emits `done`; otherwise streams get `event: closed` and end. */
  closeTrace(opts?: { done?: boolean }): void
  /** Destroys every open /events socket (a network drop). */
  dropStreams(): void
  /** While true, the streams open now get nothing at all (no events, no pings); they catch up when lifted. */
  stallStreams(stalled: boolean): void
  /** Answers every route with this status and a JSON body (null: back to normal). */
  setDown(status: number | null): void
  /** Accepts requests but never answers them. */
  setHang(hang: boolean): void
  /** What the agent's loop is doing, which decides the valid actions. */
  setLoop(state: LoopState): void
  /**
   * The agent calls escalate: the verdict is fixed and the handoff pause starts (see RuntimeCore.escalate),
   * for `pauseS` (default runner.escalation_pause_s).
   */
  escalate(reason: string, pauseS?: number): void
  /** Replaces tokens (an empty string removes one). */
  rotateTokens(tokens: { messagingToken?: string; sessionToken?: string }): void
  /** Asks a typed question as the agent (ask_human). Throws when the fields are invalid. */
  ask(request: { title: string; help?: string; fields: unknown[]; deadlineS?: number; waitS?: number }): {
    request_id: string
    revision: number
  }
  /** Places a file in the current run's output directory, served under /artifacts/ (tests of types). */
  putArtifact(path: string, body: string | Uint8Array): void
  /** Every request received (the last 10 000), for asserting what the gateway sent. */
  readonly received: ReadonlyArray<ReceivedRequest>
  /** /events connections open now. */
  readonly openEventStreams: number
  /** /events connections ever accepted. */
  readonly eventConnections: number
  close(): Promise<void>
}

const MiB = 1024 * 1024

function resolveOptions(options: SimulatedRuntimeOptions): CoreOptions {
  const core: CoreOptions = {
    kasmId: options.kasmId ?? 'demo',
    replayEvents: options.replayEvents ?? 4096,
    pingIntervalMs: options.pingIntervalMs ?? 15_000,
    inboxMessageChars: options.inboxMessageChars ?? 4000,
    attachmentBytes: options.attachmentBytes ?? 8 * MiB,
    consumer: options.consumer ?? 'loop',
    deliveryStepMs: options.deliveryStepMs ?? 100,
    observeTokenRequired: options.observeTokenRequired ?? false,
    escalationPauseS: options.escalationPauseS ?? 600,
    futureFieldTypes: new Set(options.futureFieldTypes ?? []),
    redactPatterns: (options.redactPatterns ?? []).map((source) => new RegExp(source, 'gu')),
  }
  if (options.messagingToken !== undefined && options.messagingToken !== '') {
    core.messagingToken = options.messagingToken
  }
  if (options.sessionToken !== undefined && options.sessionToken !== '')
    core.sessionToken = options.sessionToken
  return core
}

/** The URL clients use: a wildcard bind is reached on loopback. */
function baseUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}/`
}

/** Starts a simulated runtime listening on `host:port` (default 127.0.0.1, any free port). */
export async function startSimulatedRuntime(
  options: SimulatedRuntimeOptions = {},
): Promise<SimulatedRuntime> {
  const core = new RuntimeCore(resolveOptions(options))
  const controls = new ServerControls()
  const app = await buildRuntimeApp(core, controls)
  const host = options.host ?? '127.0.0.1'
  try {
    await app.listen({ host, port: options.port ?? 0 })
  } catch (error) {
    core.close()
    throw error
  }
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('the runtime has no TCP address')
  const url = baseUrl(host, address.port)
  const stopAutoplay =
    options.autoplay === undefined || options.autoplay === false
      ? () => {}
      : options.autoplay === true
        ? startAutoplay(core, 2000)
        : startAutoplay(core, options.autoplay.intervalMs ?? 2000, options.autoplay.play)
  let closing: Promise<void> | null = null

  return {
    url,
    get run() {
      return core.run
    },
    epoch: core.epoch,
    emit(type, payload) {
      const event = core.emit(type, payload)
      return { seq: event.seq, line: event.line }
    },
    newRun: () => core.newRun(),
    closeTrace: (opts) => core.closeTrace(opts),
    dropStreams: () => core.streams.drop(),
    stallStreams: (stalled) => core.streams.stall(stalled),
    setDown(status) {
      controls.down = status
    },
    setHang(hang) {
      controls.hang = hang
    },
    setLoop: (state) => core.setLoop(state),
    escalate: (reason, pauseS) => core.escalate(reason, pauseS),
    rotateTokens: (tokens) => core.credentials.rotate(tokens),
    ask(request) {
      try {
        const created = core.ask(request)
        return { request_id: created.request_id, revision: created.revision }
      } catch (error) {
        // Name the bad fields for whoever wrote the call; the HTTP body carries them as `fields`.
        if (error instanceof HttpError) throw new Error(`${error.message}: ${JSON.stringify(error.extra)}`)
        throw error
      }
    },
    putArtifact(path, body) {
      const safe = storablePath(path)
      if (safe === null) throw new Error(`not a path inside the output directory: ${path}`)
      core.current.trace.files.set(safe, Buffer.from(body))
    },
    received: controls.received,
    get openEventStreams() {
      return core.streams.count
    },
    get eventConnections() {
      return core.streams.total
    },
    close() {
      closing ??= (async () => {
        stopAutoplay()
        core.close()
        controls.releaseHeld()
        await app.close()
      })()
      return closing
    },
  }
}
