import type { FastifyInstance, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { type Operator, seesTeam } from '../auth/operator.ts'
import { Forbidden, KasmNotConfigured, SessionConflict, SessionNotFound, Unauthenticated } from '../errors.ts'
import { launchBodySchema } from '../kasm/launch.ts'
import { ADMIN } from '../openapi/routes/admin.ts'
import { zodInput } from '../openapi/zod-input.ts'
import type { SessionView } from '../sessions/types.ts'
import { admitUpstream } from '../sessions/upstream-admission.ts'
import { adminBodySchema, kasmIdSchema } from '../sessions/validate.ts'

/** How many records an answer holds (a query string's number: coerced). */
const limitSchema = z.coerce.number().int().min(1).max(1000).default(100)

/**
 * What the routes parse their requests with, and what the document says they take: one source
 * (openapi/zod-input.ts).
 */
const INPUT = {
  launch: zodInput({ body: launchBodySchema }),
  put: zodInput({
    params: z.object({ kasmId: kasmIdSchema.describe('the Kasm session id') }),
    body: adminBodySchema,
  }),
  audit: zodInput({
    querystring: z
      .object({
        limit: limitSchema,
        kasmId: kasmIdSchema.optional(),
        sub: z.string().min(1).max(256).optional().describe('the person (their `sub`)'),
      })
      .strict(),
  }),
  notifications: zodInput({
    querystring: z.object({ limit: limitSchema, kasmId: kasmIdSchema.optional() }).strict(),
  }),
}

/**
 * The admin API (role admin): sessions (tokens are write-only, never returned), recent audit records and
 * recent webhook deliveries.
 * An admin sees and changes only sessions of their teams (`*`: all); a foreign session looks unknown, on every
 * route, PUT included. Sessions from GATEWAY_SESSIONS_FILE can be read here but changed only in the file (409).
 * Deleting a launched session destroys it in Kasm first. A replica that cannot open every stored record
 * takes no registry changes (503 registry_unreadable).
 */
export async function adminRoutes(app: FastifyInstance): Promise<void> {
  // Authenticated before the body is read: an anonymous PUT with a broken body is 401, never 400.
  const onRequest = app.requireAccess('admin')
  // Every change is audited (reads are not), refusals by requireAccess included.
  const sessionsAudit = { audit: 'admin/sessions' }
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  /** Adds `staleSince` to sessions the Kasm sync did not find in Kasm. */
  const withStale = async (views: SessionView[]): Promise<SessionView[]> => {
    const stale = app.kasm ? await app.kasm.stale.all() : undefined
    if (stale === undefined || stale.size === 0) return views
    return views.map((v) => {
      const since = stale.get(v.kasmId)
      return since === undefined ? v : { ...v, staleSince: since }
    })
  }

  /**
   * The teams whose records (audit, deliveries) an admin reads: theirs, or all (undefined) with `*`. A session
   * they cannot see (or that is gone) is unknown here as on every admin route; an admin of every team may ask
   * after removed sessions.
   */
  const recordScope = async (operator: Operator, kasmId: string | undefined) => {
    const teams = operator.teams.has('*') ? undefined : operator.teams
    if (kasmId !== undefined && teams !== undefined) {
      const session = await app.sessions.get(kasmId)
      if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
    }
    return teams
  }

  app.get('/admin/sessions', { schema: ADMIN.list, onRequest }, async (request) => {
    const operator = operatorOf(request)
    const sessions = (await app.sessions.list()).filter((s) => seesTeam(operator, s.team))
    return { sessions: await withStale(sessions) }
  })

  app.get<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId',
    { schema: ADMIN.get, onRequest },
    async (request) => {
      const operator = operatorOf(request)
      const session = await app.sessions.get(request.params.kasmId)
      if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
      const { kasmId, upstream, team, source, version } = session
      return (await withStale([{ kasmId, upstream, team, source, version }]))[0]
    },
  )

  // Launch through the gateway: it mints the messaging token, Kasm starts the session with it, the session is
  // registered under Kasm's id. The token never appears in the answer.
  app.post(
    '/admin/sessions',
    { schema: ADMIN.launch, onRequest, config: { ...sessionsAudit, ...INPUT.launch.config } },
    async (request, reply) => {
      const operator = operatorOf(request)
      request.auditDetail.action = 'launch'
      const body = INPUT.launch.body(request)
      if (!seesTeam(operator, body.team)) throw new Forbidden(`team ${body.team} is not one of yours`)
      // One of the caller's teams: its admins see this launch (and its refusals) in their audit.
      request.auditDetail.team = body.team
      if (app.kasm === null) throw new KasmNotConfigured()
      // Before Kasm starts anything: a session this replica could not register would only be destroyed again.
      app.sessions.checkWritable()
      const { image_id, image, user_id, team, environment } = body
      const launched = await app.kasm.launcher.launch({
        ...(image_id === undefined ? {} : { imageId: image_id }),
        ...(image === undefined ? {} : { image }),
        ...(user_id === undefined ? {} : { userId: user_id }),
        team,
        environment: environment ?? {},
      })
      request.auditDetail.kasmId = launched.session.kasmId
      return reply.code(201).send({
        ...launched.session,
        ...(launched.viewerUrl === undefined ? {} : { viewerUrl: launched.viewerUrl }),
      })
    },
  )

  app.put<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId',
    { schema: ADMIN.put, onRequest, config: { ...sessionsAudit, ...INPUT.put.config } },
    async (request, reply) => {
      const operator = operatorOf(request)
      const { kasmId } = INPUT.put.params(request)
      request.auditDetail.kasmId = kasmId
      const body = INPUT.put.body(request)
      if (!seesTeam(operator, body.team)) throw new Forbidden(`team ${body.team} is not one of yours`)

      // A refusal is recorded under the caller's team (the body's, checked above), never under a team they
      // cannot see: a foreign session answers as an unknown id does on GET and DELETE.
      request.auditDetail.team = body.team
      app.sessions.checkWritable()
      const existing = await app.sessions.get(kasmId)
      if (existing !== undefined && !seesTeam(operator, existing.team)) throw new SessionNotFound()
      request.auditDetail.team = existing?.team ?? body.team
      request.auditDetail.action = existing === undefined ? 'create' : 'replace'
      const { lifecycle, ...registration } = body
      await admitUpstream(app.upstream.policy, app.sessions, {
        kasmId,
        team: registration.team,
        ...(registration.upstream === undefined ? {} : { upstream: registration.upstream }),
      })
      const view = await app.sessions.put({
        kasmId,
        ...registration,
        source: lifecycle === 'kasm' ? 'kasm' : 'admin',
      })
      return reply.code(existing === undefined ? 201 : 200).send(view)
    },
  )

  app.delete<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId',
    { schema: ADMIN.remove, onRequest, config: sessionsAudit },
    async (request, reply) => {
      const operator = operatorOf(request)
      request.auditDetail.action = 'delete'
      // First: a replica that cannot open every record would answer "no such session" for the ones it cannot.
      app.sessions.checkWritable()
      const session = await app.sessions.get(request.params.kasmId)
      if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
      request.auditDetail.kasmId = session.kasmId
      request.auditDetail.team = session.team
      if (session.source === 'launch') {
        // Its token is in the session's environment and nowhere else: unregistered, it would run on with a
        // token nobody holds. Destroyed first; a session Kasm did not destroy stays registered (502).
        request.auditDetail.action = 'destroy'
        if (app.kasm === null)
          throw new SessionConflict(
            `session ${session.kasmId} was launched through Kasm's Developer API, which this gateway no longer has (GATEWAY_KASM_API_URL): configure it to destroy the session, or end the session in Kasm`,
          )
        const ended = await app.kasm.destroy(session)
        request.log.info({ kasmId: session.kasmId, ended }, 'launched session destroyed in Kasm')
        await app.sessions.remove(session.kasmId)
        return reply.code(204).send()
      }
      if (!(await app.sessions.remove(session.kasmId))) throw new SessionNotFound()
      return reply.code(204).send()
    },
  )

  // Records no configured GATEWAY_ENCRYPTION_KEY opens (cluster mode): ids, teams and why, never content.
  // A record whose team cannot be read is shown only to admins of every team (`*`).
  app.get('/admin/unreadable-sessions', { schema: ADMIN.unreadable, onRequest }, async (request) => {
    const operator = operatorOf(request)
    const sessions = (await app.sessions.unreadable()).filter((s) => seesRecord(operator, s.team))
    return { sessions }
  })

  // Nothing is deleted automatically: an admin decides, and the deletion is audited.
  app.delete<{ Params: { kasmId: string } }>(
    '/admin/unreadable-sessions/:kasmId',
    { schema: ADMIN.dropUnreadable, onRequest, config: { audit: 'admin/unreadable-sessions' } },
    async (request, reply) => {
      const operator = operatorOf(request)
      request.auditDetail.action = 'delete'
      const record = (await app.sessions.unreadable()).find((s) => s.kasmId === request.params.kasmId)
      if (record === undefined || !seesRecord(operator, record.team)) throw new SessionNotFound()
      request.auditDetail.kasmId = record.kasmId
      if (!(await app.sessions.dropUnreadable(record.kasmId))) throw new SessionNotFound()
      return reply.code(204).send()
    },
  )

  app.get('/admin/audit', { schema: ADMIN.audit, onRequest, config: INPUT.audit.config }, async (request) => {
    const operator = operatorOf(request)
    const { limit, kasmId, sub } = INPUT.audit.query(request)
    const teams = await recordScope(operator, kasmId)
    const records = await app.audit.recent({
      limit,
      ...(kasmId === undefined ? {} : { kasmId }),
      ...(sub === undefined ? {} : { sub }),
      ...(teams === undefined ? {} : { teams }),
    })
    return { records }
  })

  // Recent webhook deliveries and their status (src/notify), scoped like the audit records.
  app.get(
    '/admin/notifications',
    { schema: ADMIN.notifications, onRequest, config: INPUT.notifications.config },
    async (request) => {
      const operator = operatorOf(request)
      const { limit, kasmId } = INPUT.notifications.query(request)
      const teams = await recordScope(operator, kasmId)
      const notifications = app.notifications
      const deliveries =
        notifications === null
          ? []
          : await notifications.ledger.recent({
              limit,
              ...(kasmId === undefined ? {} : { kasmId }),
              ...(teams === undefined ? {} : { teams }),
            })
      return { deliveries }
    },
  )
}

/** Whether the operator sees a stored record; one whose team cannot be read only with every team (`*`). */
function seesRecord(operator: Operator, team: string | null): boolean {
  return team === null ? operator.teams.has('*') : seesTeam(operator, team)
}

/** The authenticated operator; requireAccess guarantees one, this keeps a missing one from passing silently. */
function operatorOf(request: FastifyRequest): Operator {
  if (!request.operator) throw new Unauthenticated()
  return request.operator
}
