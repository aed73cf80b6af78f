import type { FastifyInstance } from 'fastify'
import { performAction } from '../actions.ts'
import type { RuntimeCore } from '../core.ts'
import type { RouteAccess } from '../credentials.ts'
import { inboxState } from '../inbox.ts'
import { senderOf } from './messages.ts'

/** POST /actions and GET /inbox. */
export function controlRoutes(app: FastifyInstance, core: RuntimeCore): void {
  const write: RouteAccess = { access: 'write', inbox: true }
  app.post('/actions', { config: write }, async (request, reply) => {
    const result = performAction(core, senderOf(core, request), request.body)
    return reply.code(result.status).send(result.body)
  })

  app.get('/inbox', { config: { access: 'observe', inbox: true } satisfies RouteAccess }, async () =>
    inboxState(core),
  )
}
