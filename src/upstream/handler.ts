import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { viaOf } from '../audit/via.ts'
import {
  BadRequest,
  RouteNotFound,
  SessionNotFound,
  SessionTokenOnly,
  UnsupportedMediaType,
} from '../errors.ts'
import type { Session } from '../sessions/types.ts'
import type { AnswerRequest } from './answer-policy.ts'
import { ByteLimit, isJsonBody, type JsonBody } from './body.ts'
import { forward } from './forward.ts'
import { isKasmId } from './paths.ts'
import { forwardedQuery } from './query.ts'
import type { V1Route } from './routes.ts'

/** Longest `key` / `action` copied from a body into an audit record. */
const MAX_AUDIT_TEXT = 256

function auditText(value: unknown): string | undefined {
  return typeof value === 'string' ? value.slice(0, MAX_AUDIT_TEXT) : undefined
}

/**
 * `ack` needs the session token. Compared loosely (case, surrounding space) so a runtime that normalises the
 * action cannot be handed one the gateway did not recognise.
 */
function isAck(action: unknown): boolean {
  return typeof action === 'string' && action.trim().toLowerCase() === 'ack'
}

/**
 * The request body in the form `route` needs, or 415. A Content-Encoding is refused too: the gateway forwards
 * bodies as they are and would otherwise hand the runtime compressed bytes without saying so.
 */
function bodyFor(route: V1Route, request: FastifyRequest): JsonBody | ByteLimit | undefined {
  if (route.body === 'none') return undefined
  const encoding = request.headers['content-encoding']
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity')
    throw new UnsupportedMediaType(
      `${request.headers['content-type'] ?? 'none'} with content-encoding ${encoding}`,
    )
  const body = request.body
  if (route.body === 'json' && isJsonBody(body)) {
    if (body.invalid !== undefined) throw new BadRequest(body.invalid)
    return body
  }
  if (route.body === 'multipart' && body instanceof ByteLimit) return body
  throw new UnsupportedMediaType(request.headers['content-type'] ?? 'none')
}

/** What the answer policy needs: the route's kind, the file's name (its last path segment), `?inline=1`. */
function answerRequest(route: V1Route, path: string, query: unknown): AnswerRequest {
  if (route.answer === 'json') return { kind: 'json' }
  const inline = (query as Record<string, unknown> | null)?.inline === '1'
  return { kind: route.answer, fileName: decodeURIComponent(path.slice(path.lastIndexOf('/') + 1)), inline }
}

/**
 * Handles one v1 route after `requireAccess`: validates the session id, refuses session-token-only writes
 * without forwarding them, rebuilds the upstream path and query from validated parts, resolves the session
 * (404 for unknown or foreign ones) and forwards. Fills the audit detail as it learns. A session held in
 * memory (every one, once the registry is loaded) is resolved without a promise; a refusal is thrown.
 */
export function handleV1(
  app: FastifyInstance,
  route: V1Route,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply | Promise<FastifyReply> {
  const params = request.params as Record<string, string | undefined>
  const kasmId = params.kasmId
  if (!isKasmId(kasmId)) throw new SessionNotFound()

  if (route.sessionTokenOnly) throw new SessionTokenOnly()
  const body = bodyFor(route, request)
  if (body !== undefined && isJsonBody(body)) {
    const detail = request.auditDetail
    const key = auditText(body.value.key)
    const run = auditText(body.value.run)
    if (key !== undefined) detail.key = key
    if (run !== undefined) detail.run = run
    if (route.name === 'actions') {
      const action = auditText(body.value.action)
      if (action !== undefined) detail.action = action
      if (action === 'finish_handoff') detail.via ??= viaOf(request)
    }
    // A reply's request and channel, so the console can say who answered first and the report how; never its
    // values.
    if (route.name === 'messages') {
      const replyTo = auditText(body.value.reply_to)
      if (replyTo !== undefined) {
        detail.replyTo = replyTo
        detail.via ??= viaOf(request)
      }
    }
    if (route.name === 'actions' && isAck(body.value.action)) throw new SessionTokenOnly()
  }

  const path = route.path({ params, url: request.raw.url ?? request.url })
  if (path === undefined) throw new RouteNotFound()
  const query = forwardedQuery(request.query, route.query)
  const operator = request.operator!
  const send = (session: Session): FastifyReply => {
    request.auditDetail.team = session.team
    const answer = answerRequest(route, path, request.query)
    return forward(app, request, reply, { session, route: route.name, path, query, body, answer })
  }
  const held = app.sessions.resolveHeld(kasmId, operator)
  return held === undefined ? app.sessions.resolve(kasmId, operator).then(send) : send(held)
}
