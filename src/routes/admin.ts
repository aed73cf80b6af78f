import type { FastifyInstance, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { type Operator, seesTeam } from '../auth/operator.ts'
import { BadRequest, Forbidden, SessionNotFound, Unauthenticated } from '../errors.ts'
import { admitUpstream } from '../sessions/upstream-admission.ts'
import { adminBodySchema, formatIssues, kasmIdSchema } from '../sessions/validate.ts'

const auditQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(1000).default(100),
    kasmId: kasmIdSchema.optional(),
    sub: z.string().min(1).max(256).optional(),
  })
  .strict()

/**
 * The admin API (role admin): sessions (tokens are write-only, never returned) and recent audit records.
 * An admin sees and changes only sessions of their teams (`*`: all); a foreign session looks unknown.
 * Sessions from GATEWAY_SESSIONS_FILE can be read here but changed only in the file (409).
 */
export async function adminRoutes(app: FastifyInstance): Promise<void> {
  const preHandler = app.requireAccess('admin')
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get('/admin/sessions', { preHandler }, async (request) => {
    const operator = operatorOf(request)
    const sessions = (await app.sessions.list()).filter((s) => seesTeam(operator, s.team))
    return { sessions }
  })

  app.get<{ Params: { kasmId: string } }>('/admin/sessions/:kasmId', { preHandler }, async (request) => {
    const operator = operatorOf(request)
    const session = await app.sessions.get(request.params.kasmId)
    if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
    const { kasmId, upstream, team, source, version } = session
    return { kasmId, upstream, team, source, version }
  })

  app.put<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId',
    { preHandler },
    async (request, reply) => {
      const operator = operatorOf(request)
      const id = kasmIdSchema.safeParse(request.params.kasmId)
      if (!id.success) throw new BadRequest(`kasmId: ${formatIssues(id.error)}`)
      const kasmId = id.data
      request.auditDetail.kasmId = kasmId
      request.auditDetail.route = 'admin/sessions'
      if (typeof request.body !== 'object' || request.body === null || Array.isArray(request.body))
        throw new BadRequest('body must be a JSON object {upstream?, team, messagingToken}')
      const body = adminBodySchema.safeParse(request.body)
      if (!body.success) throw new BadRequest(formatIssues(body.error))
      if (!seesTeam(operator, body.data.team))
        throw new Forbidden(`team ${body.data.team} is not one of yours`)

      const existing = await app.sessions.get(kasmId)
      request.auditDetail.team = existing?.team ?? body.data.team
      if (existing !== undefined && !seesTeam(operator, existing.team))
        throw new Forbidden('the session belongs to a team that is not one of yours')
      request.auditDetail.action = existing === undefined ? 'create' : 'replace'
      const { team, upstream } = body.data
      await admitUpstream(app.upstream.policy, app.sessions, {
        kasmId,
        team,
        ...(upstream === undefined ? {} : { upstream }),
      })
      const view = await app.sessions.put({ kasmId, ...body.data, source: 'admin' })
      return reply.code(existing === undefined ? 201 : 200).send(view)
    },
  )

  app.delete<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId',
    { preHandler },
    async (request, reply) => {
      const operator = operatorOf(request)
      request.auditDetail.route = 'admin/sessions'
      request.auditDetail.action = 'delete'
      const session = await app.sessions.get(request.params.kasmId)
      if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
      request.auditDetail.kasmId = session.kasmId
      request.auditDetail.team = session.team
      if (!(await app.sessions.remove(session.kasmId))) throw new SessionNotFound()
      return reply.code(204).send()
    },
  )

  app.get('/admin/audit', { preHandler }, async (request) => {
    const operator = operatorOf(request)
    const query = auditQuerySchema.safeParse(request.query)
    if (!query.success) throw new BadRequest(formatIssues(query.error))
    const { limit, kasmId, sub } = query.data
    // An admin of some teams reads their sessions' records only, and a session they cannot see (or that is
    // gone) is unknown here as on every admin route; an admin of every team may ask after removed sessions.
    const teams = operator.teams.has('*') ? undefined : operator.teams
    if (kasmId !== undefined && teams !== undefined) {
      const session = await app.sessions.get(kasmId)
      if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
    }
    const records = await app.audit.recent({
      limit,
      ...(kasmId === undefined ? {} : { kasmId }),
      ...(sub === undefined ? {} : { sub }),
      ...(teams === undefined ? {} : { teams }),
    })
    return { records }
  })
}

/** The authenticated operator; requireAccess guarantees one, this keeps a missing one from passing silently. */
function operatorOf(request: FastifyRequest): Operator {
  if (!request.operator) throw new Unauthenticated()
  return request.operator
}
