/**
 * Requests: typed questions from the run to a person, created by the agent (ask_human) or an outside
 * consumer (POST /requests), closed by a reply, their deadline (timeout), a cancel or the run's end.
 *
 * Where the protocol is silent: a request from POST /requests takes the runtime's default deadline
 * (runner.ask_human_timeout_s, 300 s); revisions start at 1 and nothing here revises a request.
 */

import { checkFieldDefs, type FieldDef } from '../../protocol/fields.ts'
import type { RunState, RuntimeCore } from './core.ts'
import { HttpError } from './http-error.ts'
import type { RequestClosedBy, RequestRecord } from './records.ts'
import { isRecord } from './trace.ts'

/** runner.ask_human_timeout_s */
export const DEFAULT_DEADLINE_S = 300
const REQUEST_FIELDS = new Set(['title', 'help', 'fields'])
const MAX_TITLE_CHARS = 500
const MAX_HELP_CHARS = 4000

/** What creating a request needs, whoever asks. */
export interface NewRequest {
  title: string
  help?: string
  fields: unknown[]
  deadlineS?: number
  /**
   * How long the agent really waits, when not the deadline it announces: a runtime that keeps waiting past it
   * lets a reply come late (the deadline is still what the request says). Default the deadline.
   */
  waitS?: number
}

/** POST /requests: checks the body's shape (400) and then its field definitions (422). */
export function readRequestBody(raw: unknown): NewRequest {
  if (!isRecord(raw)) throw new HttpError(400, 'invalid_body', 'the body must be a JSON object')
  if (Object.hasOwn(raw, 'sender'))
    throw new HttpError(400, 'sender_not_allowed', 'the body may not carry a sender')
  const unknown = Object.keys(raw).filter((name) => !REQUEST_FIELDS.has(name))
  if (unknown.length > 0) {
    throw new HttpError(400, 'unknown_field', `unknown field(s): ${unknown.join(', ')}`, { unknown })
  }
  if (typeof raw.title !== 'string' || raw.title.trim() === '') {
    throw new HttpError(400, 'invalid_body', 'title is required')
  }
  if (raw.help !== undefined && typeof raw.help !== 'string') {
    throw new HttpError(400, 'invalid_body', 'help must be a string')
  }
  if (!Array.isArray(raw.fields)) throw new HttpError(400, 'invalid_body', 'fields must be a list')
  return raw.help === undefined
    ? { title: raw.title, fields: raw.fields }
    : { title: raw.title, help: raw.help, fields: raw.fields }
}

/** Creates and announces a request (a `request` event; a `tool:ask_human(...)` step row when the agent asks). */
export function createRequest(
  core: RuntimeCore,
  input: NewRequest,
  askedBy: RequestRecord['asked_by'],
): RequestRecord {
  const run = core.current
  if (run.inboxClosed) throw new HttpError(409, 'inbox_closed', 'the run has ended')
  if ([...input.title].length > MAX_TITLE_CHARS) {
    throw new HttpError(422, 'invalid_request', `title is longer than ${MAX_TITLE_CHARS} characters`, {
      fields: [{ field: 'title', error: 'too long' }],
    })
  }
  if (input.help !== undefined && [...input.help].length > MAX_HELP_CHARS) {
    throw new HttpError(422, 'invalid_request', `help is longer than ${MAX_HELP_CHARS} characters`, {
      fields: [{ field: 'help', error: 'too long' }],
    })
  }
  const fields = checkFieldDefs(input.fields, core.options.futureFieldTypes)
  if (fields.length > 0)
    throw new HttpError(422, 'invalid_fields', 'the request fields are not valid', { fields })
  const deadlineS = input.deadlineS ?? DEFAULT_DEADLINE_S
  if (!(deadlineS > 0)) throw new HttpError(422, 'invalid_request', 'the deadline must be in the future')

  const now = Date.now()
  const request: RequestRecord = {
    run: run.run,
    request_id: `q${++run.requestSeq}`,
    schema_version: 1,
    revision: 1,
    title: input.title,
    ...(input.help === undefined ? {} : { help: input.help }),
    fields: input.fields as FieldDef[],
    deadline: new Date(now + deadlineS * 1000).toISOString(),
    state: 'open',
    asked_by: askedBy,
    created_at: new Date(now).toISOString(),
  }
  run.requests.set(request.request_id, request)
  run.requestDeadlines.set(
    request.request_id,
    core.timers.after((input.waitS ?? deadlineS) * 1000, () => {
      if (request.state === 'open') closeRequest(core, run, request, 'timeout')
    }),
  )
  if (askedBy === 'agent') {
    core.step(run, {
      action: `tool:ask_human(${JSON.stringify(input.title)})`,
      backend: 'inbox',
      result: `waiting for ${request.request_id} until ${request.deadline}`,
    })
  }
  core.emitFor(run, 'request', request)
  return request
}

/** Closes an open request and emits its closing. */
export function closeRequest(
  core: RuntimeCore,
  run: RunState,
  request: RequestRecord,
  closedBy: RequestClosedBy,
  replyId?: string,
): void {
  if (request.state !== 'open') return
  request.state = 'closed'
  request.closed_by = closedBy
  request.closed_at = new Date().toISOString()
  if (replyId !== undefined) request.reply_id = replyId
  run.requestDeadlines.get(request.request_id)?.()
  run.requestDeadlines.delete(request.request_id)
  core.emitFor(run, 'request', request)
  core.hooks.onRequestClosed?.(request)
}

/** POST /requests/<id>/cancel */
export function cancelRequest(core: RuntimeCore, requestId: string): RequestRecord {
  const run = core.current
  const request = run.requests.get(requestId)
  if (request === undefined) throw new HttpError(404, 'not_found', `no request ${requestId} in this run`)
  if (request.state !== 'open') {
    throw new HttpError(409, 'request_closed', `request ${requestId} is closed`, {
      closed_by: request.closed_by,
    })
  }
  closeRequest(core, run, request, 'cancelled')
  return request
}
