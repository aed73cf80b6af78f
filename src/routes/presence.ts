import type { FastifyInstance } from 'fastify'
import { StoreUnavailable } from '../errors.ts'
import { ADMIN } from '../openapi/routes/admin.ts'

/**
 * `GET /admin/sessions/:kasmId/presence` (role admin): how many event streams are open on a session and
 * which operators hold them, over every replica. A foreign or unknown session answers 404 alike; a Redis
 * fault answers 503. Memory presence in embedded mode, Redis presence in cluster mode (src/cluster).
 */
export async function presenceRoutes(app: FastifyInstance): Promise<void> {
  const onRequest = app.requireAccess('admin')
  app.get<{ Params: { kasmId: string } }>(
    '/admin/sessions/:kasmId/presence',
    { schema: ADMIN.presence, onRequest },
    async (request, reply) => {
      const session = await app.sessions.resolve(request.params.kasmId, request.operator!)
      reply.header('cache-control', 'no-store')
      try {
        return await app.presence.of(session.kasmId)
      } catch (err) {
        throw new StoreUnavailable('presence', { cause: err })
      }
    },
  )
}
