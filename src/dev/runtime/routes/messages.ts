import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { RuntimeCore } from '../core.ts'
import type { RouteAccess, Sender } from '../credentials.ts'
import { HttpError } from '../http-error.ts'
import { submitMessage } from '../inbox.ts'
import { MESSAGE_STATES, type MessageState } from '../records.ts'

const READ: RouteAccess = { access: 'observe', inbox: true }
const WRITE: RouteAccess = { access: 'write', inbox: true }

/** The sender of a request that passed a `write` or `session` check. */
export function senderOf(core: RuntimeCore, request: FastifyRequest): Sender {
  const sender = core.credentials.sender(request)
  if (sender === null) throw new HttpError(401, 'unauthorized', 'a runtime token is required')
  return sender
}

function parseStates(raw: unknown): Set<MessageState> | null {
  if (raw === undefined) return null
  const names = typeof raw === 'string' ? raw.split(',').filter((name) => name !== '') : null
  const valid = new Set<string>(MESSAGE_STATES)
  if (names === null || names.length === 0 || !names.every((name) => valid.has(name))) {
    throw new HttpError(400, 'invalid_state', `state must list some of ${MESSAGE_STATES.join(', ')}`)
  }
  return new Set(names as MessageState[])
}

function parseSince(raw: unknown): number | null {
  if (raw === undefined) return null
  if (typeof raw !== 'string' || !/^\d{1,15}$/.test(raw)) {
    throw new HttpError(400, 'invalid_since', 'since must be a non-negative integer revision')
  }
  return Number(raw)
}

/**
 * POST /messages, GET /messages?since=&state= (the current run's, oldest first, as
 * `{run, epoch, rev, messages}`), GET /messages/<id>, GET /runs/<run>/messages/<key> (by the caller's own
 * sender and key, in any run this runtime served).
 */
export function messageRoutes(app: FastifyInstance, core: RuntimeCore): void {
  app.post('/messages', { config: WRITE }, async (request, reply) => {
    const result = submitMessage(core, senderOf(core, request), request.body)
    return reply.code(result.status).send(result.body)
  })

  app.get('/messages', { config: READ }, async (request) => {
    const query = request.query as Record<string, unknown>
    const since = parseSince(query.since)
    const states = parseStates(query.state)
    const run = core.current
    const messages = run.messages.filter(
      (message) => (since === null || message.rev > since) && (states === null || states.has(message.state)),
    )
    return { run: run.run, epoch: core.epoch, rev: run.rev, messages }
  })

  app.get('/messages/:id', { config: READ }, async (request) => {
    const message = core.current.messagesById.get((request.params as { id: string }).id)
    if (message === undefined)
      throw new HttpError(404, 'not_found', `no message ${(request.params as { id: string }).id} in this run`)
    return message
  })

  app.get('/runs/:run/messages/:key', { config: WRITE }, async (request) => {
    const { run, key } = request.params as { run: string; key: string }
    const message = core.history.get(`${run}\0${senderOf(core, request)}\0${key}`)
    if (message === undefined)
      throw new HttpError(404, 'not_found', 'that run never held a message with that key')
    return message
  })
}
