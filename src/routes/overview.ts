import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { whoAnswered } from '../audit/answers.ts'
import type { AuditRecord } from '../audit/types.ts'
import { viaOf } from '../audit/via.ts'
import {
  AnswerUnknown,
  QuestionClosed,
  QuestionNotYours,
  QuestionTaken,
  ShuttingDown,
  StoreUnavailable,
} from '../errors.ts'
import { countWhenClosed } from '../metrics/streams.ts'
import { CONSOLE } from '../openapi/routes/console.ts'
import { KASM_ID } from '../sessions/types.ts'
import { RUN_ID } from './events.ts'

interface QuestionRoute {
  Params: { kasmId: string; requestId: string }
  Querystring: { run: string }
}

const RUN_QUERY = {
  type: 'object',
  properties: { run: { type: 'string', pattern: RUN_ID.source } },
  required: ['run'],
  additionalProperties: false,
} as const

const QUESTION = {
  params: {
    type: 'object',
    properties: {
      kasmId: { type: 'string', pattern: KASM_ID.source },
      requestId: { type: 'string', pattern: '^[\\x21-\\x7e]{1,100}$' },
    },
    required: ['kasmId', 'requestId'],
  },
  querystring: RUN_QUERY,
} as const

const RUN = {
  params: {
    type: 'object',
    properties: { kasmId: { type: 'string', pattern: KASM_ID.source } },
    required: ['kasmId'],
  },
  querystring: RUN_QUERY,
} as const

/**
 * The console's API under the base path:
 * - `GET api/overview` (viewer): ONE server-sent-event stream of every session the caller may see (see
 *   src/overview/hub.ts for its events), counted against the caller's stream cap;
 * - `PUT|DELETE api/sessions/:kasmId/requests/:requestId/claim?run=` (operator): "I'm on it" on a question,
 *   409 `question_taken` naming who holds it, `question_closed` when it is no longer open; audited (route
 *   `claim`, action `claim` or `release`, through what: the console, or a chat that calls it as the person,
 *   chat/claims.ts), refusals included;
 * - `GET api/sessions/:kasmId/requests/:requestId/answer?run=` (viewer): who answered it through the gateway
 *   (from the audit log: a name and a time, never the values), 404 `answer_unknown` when nobody did here;
 * - `GET api/sessions/:kasmId/activity?run=` (viewer): who sent each message of the run and who took each
 *   control action through the gateway ({@link RunActivity}: names and times by idempotency key).
 * A session the caller may not see answers 404 exactly like an unknown one.
 */
export async function overviewRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/api/overview',
    { schema: CONSOLE.overview, onRequest: app.requireAccess('read') },
    async (request, reply) => {
      const operator = request.operator!
      if (app.readiness.draining) throw new ShuttingDown()
      const reservation = await app.events.streams.reserve(operator)
      reply.hijack()
      let socket: Socket
      try {
        socket = app.events.takeover.take(request.raw, reply.raw)
        countWhenClosed(app, request, reply, socket)
      } catch (err) {
        reservation.release()
        request.log.error({ err }, 'overview stream failed to open')
        request.raw.socket.destroy()
        return
      }
      // From here the stream owns the reservation: it is given back when the socket closes.
      await app.overview.hub.open(reservation, socket, request.id).catch((err: unknown) => {
        request.log.error({ err }, 'overview stream failed')
        socket.destroy()
      })
    },
  )

  const claimPath = '/api/sessions/:kasmId/requests/:requestId/claim'
  /** What a claim's audit record says beyond the route: the question, the run, and through what. */
  const auditClaim = (request: FastifyRequest<QuestionRoute>, action: 'claim' | 'release'): void => {
    const detail = request.auditDetail
    detail.action = action
    detail.run = request.query.run
    detail.question = request.params.requestId
    detail.via = viaOf(request)
  }
  app.put<QuestionRoute>(
    claimPath,
    {
      schema: { ...QUESTION, ...CONSOLE.claim },
      onRequest: app.requireAccess('write'),
      config: { audit: 'claim' },
    },
    async (request) => {
      const { kasmId, requestId } = request.params
      const { run } = request.query
      auditClaim(request, 'claim')
      await app.sessions.resolve(kasmId, request.operator!)
      const summary = app.summaries.publication(kasmId)?.summary
      // Refused only when this replica knows better; a summary not watched here cannot say.
      if (summary?.run === run && !summary.openRequests.some((r) => r.requestId === requestId))
        throw new QuestionClosed()
      const result = await shared('question marks', () =>
        app.overview.claims.take(kasmId, run, requestId, request.operator!),
      )
      if (!result.taken) throw new QuestionTaken(result.holder.name)
      return { name: result.claim.name, at: result.claim.at }
    },
  )

  app.delete<QuestionRoute>(
    claimPath,
    {
      schema: { ...QUESTION, ...CONSOLE.release },
      onRequest: app.requireAccess('write'),
      config: { audit: 'claim' },
    },
    async (request, reply) => {
      const { kasmId, requestId } = request.params
      auditClaim(request, 'release')
      await app.sessions.resolve(kasmId, request.operator!)
      const released = await shared('question marks', () =>
        app.overview.claims.release(kasmId, request.query.run, requestId, request.operator!),
      )
      if (!released) throw new QuestionNotYours()
      return reply.code(204).send()
    },
  )

  // Who sent each message and who stopped or handed back the run, as the answer above says who answered: what
  // a reader of the session may know (its messages carry their keys), from the audit log.
  app.get<{ Params: { kasmId: string }; Querystring: { run: string } }>(
    '/api/sessions/:kasmId/activity',
    {
      schema: { ...RUN, ...CONSOLE.activity },
      onRequest: app.requireAccess('read'),
    },
    async (request, reply) => {
      const { kasmId } = request.params
      await app.sessions.resolve(kasmId, request.operator!)
      const records = await shared('audit log', () =>
        app.audit.recent({ limit: ACTIVITY_RECORDS, kasmId, run: request.query.run }),
      )
      reply.header('cache-control', 'no-store')
      return activityOf(records)
    },
  )

  app.get<QuestionRoute>(
    '/api/sessions/:kasmId/requests/:requestId/answer',
    { schema: { ...QUESTION, ...CONSOLE.answer }, onRequest: app.requireAccess('read') },
    async (request, reply) => {
      const { kasmId, requestId } = request.params
      await app.sessions.resolve(kasmId, request.operator!)
      const answer = await shared('audit log', () =>
        whoAnswered(app.audit, { kasmId, run: request.query.run, requestId }),
      )
      if (answer === null) throw new AnswerUnknown()
      reply.header('cache-control', 'no-store')
      return { name: answer.name, at: answer.at }
    },
  )
}

/** At most this many audit records of one run are read for {@link activityOf} (the newest). */
const ACTIVITY_RECORDS = 500

/** Who did what in a run through the gateway, as `GET api/sessions/:kasmId/activity` answers it. */
export interface RunActivity {
  /** Messages and replies the runtime accepted, by the sender's idempotency key (the message record's `key`). */
  readonly messages: readonly { key: string; name: string; at: string }[]
  /** Control actions the runtime accepted (`stop`, `finish_handoff`), by key, oldest first. */
  readonly actions: readonly { key: string; action: string; name: string; at: string }[]
}

/**
 * The accepted writes among `records` (newest first, as the audit log returns them): a name and a time per
 * idempotency key, never a value, an address or a status. A retry under the same key keeps the first record.
 */
export function activityOf(records: readonly AuditRecord[]): RunActivity {
  const messages = new Map<string, { key: string; name: string; at: string }>()
  const actions = new Map<string, { key: string; action: string; name: string; at: string }>()
  for (const r of [...records].reverse()) {
    if (r.status < 200 || r.status >= 300 || r.key === undefined) continue
    const name = r.name ?? r.sub ?? 'someone'
    if (r.route === 'messages' && !messages.has(r.key)) messages.set(r.key, { key: r.key, name, at: r.at })
    else if (r.route === 'actions' && r.action !== undefined && !actions.has(r.key))
      actions.set(r.key, { key: r.key, action: r.action, name, at: r.at })
  }
  return { messages: [...messages.values()], actions: [...actions.values()] }
}

/** Shared state that cannot be read or written answers 503 `store_unavailable`, not 500. */
export async function shared<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw new StoreUnavailable(what, { cause: err })
  }
}
