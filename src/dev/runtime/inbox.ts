/**
 * Messages: storing them (POST /messages, replies included), their delivery states, and the simulated
 * consumer that moves them along.
 *
 * With consumer `loop` the runtime's own loop reads messages: while the loop runs, every
 * `deliveryStepMs` the pending ones (at most inbox_drain_max = 8 per model request) become queued (with a
 * `message:<id>` step row), queued become dispatched and dispatched become responded. While the loop is idle
 * they wait as pending. Once it has exited (a stop completed, or an escalation), pending and queued messages
 * become undelivered and so does every later one. With consumer `external` messages stay where the outside
 * consumer's `ack` action puts them. At the end of a run pending and queued messages become undelivered and
 * dispatched ones unknown (the runtime never guesses a message was seen).
 */

import { checkReply } from '../../protocol/fields.ts'
import type { RunState, RuntimeCore } from './core.ts'
import type { Sender } from './credentials.ts'
import { canonical, checkEnvelope } from './envelope.ts'
import { HttpError } from './http-error.ts'
import type { MessageRecord, MessageState } from './records.ts'
import { closeRequest } from './requests.ts'
import { isRecord } from './trace.ts'

const MESSAGE_FIELDS: ReadonlySet<string> = new Set([
  'run',
  'key',
  'text',
  'attachments',
  'reply_to',
  'revision',
  'values',
])
const DRAIN_MAX = 8
const MAX_ATTACHMENTS = 16
const PREVIEW_CHARS = 160

/** A write's outcome: 202 stored now, 200 a retry of what was stored. */
export interface Stored<T> {
  status: 200 | 202
  body: T
}

/** The content part of a message: what "same content" compares on a retry. */
type Content = Pick<MessageRecord, 'text' | 'attachments' | 'reply_to' | 'revision' | 'values'>

function readContent(body: Record<string, unknown>): Content {
  const content: Content = {}
  if (body.text !== undefined) {
    if (typeof body.text !== 'string') throw new HttpError(400, 'invalid_body', 'text must be a string')
    content.text = body.text
  }
  if (body.attachments !== undefined) {
    const list = body.attachments
    if (!Array.isArray(list) || !list.every((id): id is string => typeof id === 'string')) {
      throw new HttpError(400, 'invalid_body', 'attachments must be a list of attachment ids')
    }
    if (list.length > MAX_ATTACHMENTS) {
      throw new HttpError(400, 'invalid_body', `at most ${MAX_ATTACHMENTS} attachments`)
    }
    content.attachments = list
  }
  if (body.reply_to !== undefined) {
    if (typeof body.reply_to !== 'string')
      throw new HttpError(400, 'invalid_body', 'reply_to must be a string')
    content.reply_to = body.reply_to
  }
  if (body.revision !== undefined) {
    if (!Number.isSafeInteger(body.revision)) {
      throw new HttpError(400, 'invalid_body', 'revision must be an integer')
    }
    content.revision = body.revision as number
  }
  if (body.values !== undefined) {
    if (!isRecord(body.values)) throw new HttpError(400, 'invalid_body', 'values must be an object')
    content.values = body.values
  }
  return content
}

/** POST /messages: a message or a reply from `sender`. */
export function submitMessage(core: RuntimeCore, sender: Sender, raw: unknown): Stored<MessageRecord> {
  const { body, key } = checkEnvelope(core, raw, MESSAGE_FIELDS)
  const content = readContent(body)
  if (content.text !== undefined && [...content.text].length > core.options.inboxMessageChars) {
    throw new HttpError(
      413,
      'message_too_long',
      `text is longer than ${core.options.inboxMessageChars} characters`,
      {
        limit: core.options.inboxMessageChars,
      },
    )
  }
  const isReply = content.reply_to !== undefined
  if (!isReply && (content.values !== undefined || content.revision !== undefined)) {
    throw new HttpError(400, 'invalid_body', 'values and revision belong to a reply (reply_to)')
  }
  if (isReply && content.revision === undefined) {
    throw new HttpError(400, 'invalid_body', "a reply needs the request's revision")
  }
  if (!isReply && (content.text ?? '').trim() === '' && (content.attachments ?? []).length === 0) {
    throw new HttpError(400, 'empty_message', 'a message needs text or attachments')
  }
  const missing = (content.attachments ?? []).filter((id) => !core.attachments.has(id))
  if (missing.length > 0) {
    throw new HttpError(400, 'unknown_attachment', `no such attachment: ${missing.join(', ')}`, { missing })
  }

  const run = core.current
  const stored = run.messageKeys.get(`${sender}\0${key}`)
  if (stored !== undefined) {
    if (canonical(contentOf(stored)) === canonical(content)) return { status: 200, body: stored }
    throw new HttpError(409, 'key_conflict', 'this key was used for a different message', { id: stored.id })
  }

  const request = isReply ? checkReplyTarget(core, run, content) : null
  const now = new Date().toISOString()
  const record: MessageRecord = {
    id: core.nextMessageId(),
    run: run.run,
    key,
    sender,
    ...content,
    state: 'pending',
    rev: ++run.rev,
    received_at: now,
    updated_at: now,
  }
  if (run.inboxClosed) {
    record.state = 'undelivered'
    record.undelivered_reason = 'the run has ended'
  } else if (core.options.consumer === 'loop' && run.loopExited) {
    record.state = 'undelivered'
    record.undelivered_reason = 'the loop has stopped'
  }
  run.messages.push(record)
  run.messagesById.set(record.id, record)
  run.messageKeys.set(`${sender}\0${key}`, record)
  core.history.set(`${run.run}\0${sender}\0${key}`, record)
  core.emitFor(run, 'message', record)
  if (request !== null) closeRequest(core, run, request, 'reply', record.id)
  core.hooks.onMessage?.(record)
  if (record.state === 'pending') schedulePump(core)
  return { status: 202, body: record }
}

function contentOf(record: MessageRecord): Content {
  const { text, attachments, reply_to, revision, values } = record
  return { text, attachments, reply_to, revision, values }
}

/** A reply must answer an open request at its current revision with values its fields accept. */
function checkReplyTarget(core: RuntimeCore, run: RunState, content: Content) {
  const request = run.requests.get(content.reply_to ?? '')
  if (request === undefined)
    throw new HttpError(409, 'unknown_request', `no request ${content.reply_to} in this run`)
  if (request.state !== 'open') {
    throw new HttpError(409, 'request_closed', `request ${request.request_id} is closed`, {
      closed_by: request.closed_by,
    })
  }
  if (content.revision !== request.revision) {
    throw new HttpError(
      409,
      'stale_revision',
      `request ${request.request_id} is at revision ${request.revision}`,
      {
        revision: request.revision,
      },
    )
  }
  // Values are redacted before they are written anywhere: a value that redaction would turn into something
  // invalid is refused like any other invalid one.
  const values = redactValues(core.options.redactPatterns, content.values ?? {})
  const fields = checkReply(request.fields, values, (id) => core.attachments.get(id))
  if (fields.length > 0)
    throw new HttpError(422, 'invalid_reply', 'the reply does not fit the request', { fields })
  return request
}

/** The text redaction puts in place of what a redaction rule matched. */
export const REDACTED = '[REDACTED]'

/** `values` with every match of the redaction rules in their strings (and string lists) replaced. */
function redactValues(rules: readonly RegExp[], values: Record<string, unknown>): Record<string, unknown> {
  if (rules.length === 0) return values
  const redact = (v: unknown): unknown =>
    typeof v === 'string'
      ? rules.reduce((s, rule) => s.replace(rule, REDACTED), v)
      : Array.isArray(v)
        ? v.map(redact)
        : v
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, redact(v)]))
}

/** Moves a message to `state`, bumping the inbox revision and emitting a delivery event. */
export function setMessageState(
  core: RuntimeCore,
  run: RunState,
  message: MessageRecord,
  state: MessageState,
  extra: { undelivered_reason?: string; detail?: string } = {},
): void {
  message.state = state
  message.rev = ++run.rev
  message.updated_at = new Date().toISOString()
  if (extra.undelivered_reason !== undefined) message.undelivered_reason = extra.undelivered_reason
  if (extra.detail !== undefined) message.detail = extra.detail
  core.emitFor(run, 'delivery', message)
}

/** Schedules one step of the loop consumer, unless one is scheduled (consumer `loop` only). */
export function schedulePump(core: RuntimeCore): void {
  if (core.options.consumer !== 'loop' || core.pumpCancel !== null) return
  core.pumpCancel = core.timers.after(core.options.deliveryStepMs, () => {
    core.pumpCancel = null
    pump(core)
  })
}

function pump(core: RuntimeCore): void {
  const run = core.current
  if (run.inboxClosed) return
  // Latest states first, so each message moves one state per step.
  for (const message of run.messages.filter((m) => m.state === 'dispatched')) {
    setMessageState(core, run, message, 'responded')
  }
  const canRequest = core.loop === 'running' && run.stoppingTool === null && !run.loopExited
  if (canRequest) {
    for (const message of run.messages.filter((m) => m.state === 'queued')) {
      setMessageState(core, run, message, 'dispatched')
    }
    for (const message of run.messages.filter((m) => m.state === 'pending').slice(0, DRAIN_MAX)) {
      setMessageState(core, run, message, 'queued')
      core.step(run, { action: `message:${message.id}`, backend: 'inbox', result: preview(message) })
    }
  }
  const waiting = run.messages.some(
    (m) => m.state === 'dispatched' || (canRequest && (m.state === 'pending' || m.state === 'queued')),
  )
  if (waiting) schedulePump(core)
}

function preview(message: MessageRecord): string {
  const text = message.reply_to !== undefined ? JSON.stringify(message.values ?? {}) : (message.text ?? '')
  const clipped = [...text].length > PREVIEW_CHARS ? `${[...text].slice(0, PREVIEW_CHARS).join('')}…` : text
  const files = (message.attachments ?? []).length
  return `[${message.sender}] ${clipped}${files > 0 ? ` (+${files} attachment${files > 1 ? 's' : ''})` : ''}`
}

/** The loop exited (stop completed, or escalation): nothing pending or queued will reach a model now. */
export function exitLoop(core: RuntimeCore, run: RunState, reason: string): void {
  if (core.options.consumer !== 'loop') return
  run.loopExited = true
  for (const message of run.messages) {
    if (message.state === 'pending' || message.state === 'queued') {
      setMessageState(core, run, message, 'undelivered', { undelivered_reason: reason })
    }
  }
}

/** The run ended: settle every message and close every open request. Idempotent. */
export function endRunInbox(core: RuntimeCore, run: RunState, reason: string): void {
  if (run.inboxClosed) return
  for (const message of run.messages) {
    if (message.state === 'pending' || message.state === 'queued') {
      setMessageState(core, run, message, 'undelivered', { undelivered_reason: reason })
    } else if (message.state === 'dispatched') {
      setMessageState(core, run, message, 'unknown', {
        detail: 'the run ended while a model request carrying it was in flight',
      })
    }
  }
  for (const request of run.requests.values()) {
    if (request.state === 'open') closeRequest(core, run, request, 'run_ended')
  }
  run.inboxClosed = true
  run.stoppingTool = null
  core.pumpCancel?.()
  core.pumpCancel = null
}

/** GET /inbox: fields that would be empty or false are left out; counts always has pending and queued. */
export function inboxState(core: RuntimeCore): Record<string, unknown> {
  const run = core.current
  const counts: Record<string, number> = { pending: 0, queued: 0 }
  for (const message of run.messages) counts[message.state] = (counts[message.state] ?? 0) + 1
  const open = [...run.requests.values()].filter((r) => r.state === 'open').map((r) => r.request_id)
  const state: Record<string, unknown> = {
    run: run.run,
    epoch: core.epoch,
    consumer: core.options.consumer,
    rev: run.rev,
    counts,
  }
  if (open.length > 0) state.open_requests = open
  if (run.stoppingTool !== null) {
    state.stopping = true
    state.stopping_tool = run.stoppingTool
  }
  if (run.inboxClosed) state.closed = true
  return state
}
