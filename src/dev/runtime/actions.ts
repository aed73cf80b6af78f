/**
 * Control actions (POST /actions): stop, finish_handoff and ack, each valid in one loop state.
 *
 * Where the protocol is silent: an accepted action answers 202 with its record, a retry with the same key
 * and content 200 with it. A refused one answers 409 `{error: 'invalid_state', state: <found>}` and is
 * recorded (an action event with state `refused`) but not kept under its key, so a retry is judged afresh.
 * The states found are the loop's (`idle`, `running`, `escalation`), `stopping` while a stop waits for the
 * tool in flight, `closed` once the run ended, and `loop` for an ack while the runtime's own loop consumes
 * the messages. ack moves messages forward only; a state at or behind the current one is left as it is.
 */

import type { RunState, RuntimeCore } from './core.ts'
import type { Sender } from './credentials.ts'
import { canonical, checkEnvelope } from './envelope.ts'
import { HttpError } from './http-error.ts'
import { exitLoop, type Stored, setMessageState } from './inbox.ts'
import { type ActionRecord, MESSAGE_STATES, type MessageState, STATE_RANK } from './records.ts'
import { isRecord } from './trace.ts'

const ACTION_FIELDS: ReadonlySet<string> = new Set(['run', 'key', 'action', 'args'])
const ACTIONS = new Set(['stop', 'finish_handoff', 'ack'])
const ACK_STATES = new Set<string>(MESSAGE_STATES.filter((state) => state !== 'pending'))
const MAX_ACK_IDS = 100
/** The tool a stop waits for, as the runtime names it in GET /inbox's stopping_tool. */
const TOOL_IN_FLIGHT = 'computer.click'

interface AckArgs {
  ids: string[]
  state: MessageState
  detail?: string
}

function readAckArgs(args: Record<string, unknown> | undefined): AckArgs {
  const ids = args?.ids
  if (
    !Array.isArray(ids) ||
    ids.length === 0 ||
    ids.length > MAX_ACK_IDS ||
    !ids.every((id) => typeof id === 'string')
  ) {
    throw new HttpError(400, 'invalid_args', `ack needs args.ids: 1-${MAX_ACK_IDS} message ids`)
  }
  const state = args?.state
  if (typeof state !== 'string' || !ACK_STATES.has(state)) {
    throw new HttpError(400, 'invalid_args', `args.state must be one of ${[...ACK_STATES].join(', ')}`)
  }
  const detail = args?.detail
  if (detail !== undefined && typeof detail !== 'string') {
    throw new HttpError(400, 'invalid_args', 'args.detail must be a string')
  }
  return detail === undefined
    ? { ids, state: state as MessageState }
    : { ids, state: state as MessageState, detail }
}

/** Why `action` cannot run now (the state found), or null when it can. */
function refusal(core: RuntimeCore, run: RunState, action: string): string | null {
  if (run.inboxClosed) return 'closed'
  if (action === 'stop') {
    if (run.stoppingTool !== null) return 'stopping'
    return core.loop === 'running' && !run.loopExited ? null : core.loop
  }
  if (action === 'finish_handoff') return core.loop === 'escalation' ? null : core.loop
  return core.options.consumer === 'external' ? null : 'loop'
}

/** POST /actions from `sender`. */
export function performAction(core: RuntimeCore, sender: Sender, raw: unknown): Stored<ActionRecord> {
  const { body, key } = checkEnvelope(core, raw, ACTION_FIELDS)
  const action = body.action
  if (typeof action !== 'string' || !ACTIONS.has(action)) {
    throw new HttpError(400, 'unknown_action', `action must be one of ${[...ACTIONS].join(', ')}`)
  }
  if (body.args !== undefined && !isRecord(body.args)) {
    throw new HttpError(400, 'invalid_args', 'args must be an object')
  }
  const args = body.args as Record<string, unknown> | undefined
  if (action === 'ack' && sender !== 'orchestrator') {
    throw new HttpError(403, 'forbidden', 'ack needs the session token')
  }
  const run = core.current
  const stored = run.actionKeys.get(`${sender}\0${key}`)
  if (stored !== undefined) {
    if (canonical({ action: stored.action, args: stored.args }) === canonical({ action, args })) {
      return { status: 200, body: stored }
    }
    throw new HttpError(409, 'key_conflict', 'this key was used for a different action', { id: stored.id })
  }
  const ack = action === 'ack' ? readAckArgs(args) : null

  const now = new Date().toISOString()
  const record: ActionRecord = {
    id: core.nextActionId(),
    run: run.run,
    key,
    sender,
    action,
    ...(args === undefined ? {} : { args }),
    state: 'accepted',
    received_at: now,
    updated_at: now,
  }
  const found = refusal(core, run, action)
  if (found !== null) {
    record.state = 'refused'
    record.found = found
    run.actions.push(record)
    core.emitFor(run, 'action', record)
    throw new HttpError(409, 'invalid_state', `${action} is not valid now (${found})`, {
      state: found,
      action: record,
    })
  }
  const unknown = ack === null ? [] : ack.ids.filter((id) => !run.messagesById.has(id))
  if (unknown.length > 0) {
    throw new HttpError(400, 'unknown_message', `no message ${unknown.join(', ')} in this run`, { unknown })
  }
  run.actions.push(record)
  run.actionKeys.set(`${sender}\0${key}`, record)
  core.emitFor(run, 'action', record)
  if (action === 'stop') startStop(core, run, record)
  else if (action === 'finish_handoff') finishHandoff(core, run)
  else if (ack !== null) applyAck(core, run, ack)
  return { status: 202, body: record }
}

/** Accepted at once; stopped once the tool in flight finished (a couple of delivery steps later). */
function startStop(core: RuntimeCore, run: RunState, record: ActionRecord): void {
  run.stoppingTool = TOOL_IN_FLIGHT
  core.timers.after(core.options.deliveryStepMs * 2, () => {
    if (run !== core.current || run.stoppingTool === null) return
    run.stoppingTool = null
    core.loop = 'idle'
    exitLoop(core, run, 'the loop was stopped before a model request carried it')
    record.state = 'stopped'
    record.updated_at = new Date().toISOString()
    core.emitFor(run, 'action', record)
    core.hooks.onLoopExit?.('stopped')
  })
}

/** Ends the escalation pause now: the escalation record says ended_by operator; the run does not resume. */
function finishHandoff(core: RuntimeCore, run: RunState): void {
  core.endEscalation(run, 'operator')
}

function applyAck(core: RuntimeCore, run: RunState, ack: AckArgs): void {
  for (const id of ack.ids) {
    const message = run.messagesById.get(id)
    if (message === undefined || STATE_RANK[ack.state] <= STATE_RANK[message.state]) continue
    const extra: { undelivered_reason?: string; detail?: string } = {}
    if (ack.detail !== undefined) extra.detail = ack.detail
    if (ack.state === 'undelivered') extra.undelivered_reason = ack.detail ?? 'reported by the consumer'
    setMessageState(core, run, message, ack.state, extra)
  }
}
