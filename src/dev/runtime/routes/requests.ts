import type { FastifyInstance } from 'fastify'
import type { RuntimeCore } from '../core.ts'
import type { RouteAccess } from '../credentials.ts'
import { HttpError } from '../http-error.ts'
import { cancelRequest, createRequest, readRequestBody } from '../requests.ts'

const READ: RouteAccess = { access: 'observe', inbox: true }
const SESSION: RouteAccess = { access: 'session', inbox: true }
const REQUEST_STATES = new Set(['open', 'closed'])

/** GET /requests?state=, GET /requests/<id>, POST /requests (201), POST /requests/<id>/cancel. */
export function requestRoutes(app: FastifyInstance, core: RuntimeCore): void {
  app.get('/requests', { config: READ }, async (request) => {
    const raw = (request.query as Record<string, unknown>).state
    let states: Set<string> | null = null
    if (raw !== undefined) {
      const names = typeof raw === 'string' ? raw.split(',').filter((name) => name !== '') : []
      if (names.length === 0 || !names.every((name) => REQUEST_STATES.has(name))) {
        throw new HttpError(400, 'invalid_state', 'state must be open, closed or both')
      }
      states = new Set(names)
    }
    const run = core.current
    const requests = [...run.requests.values()].filter((r) => states === null || states.has(r.state))
    return { run: run.run, requests }
  })

  app.get('/requests/:id', { config: READ }, async (request) => {
    const found = core.current.requests.get((request.params as { id: string }).id)
    if (found === undefined)
      throw new HttpError(404, 'not_found', `no request ${(request.params as { id: string }).id} in this run`)
    return found
  })

  app.post('/requests', { config: SESSION }, async (request, reply) => {
    return reply.code(201).send(createRequest(core, readRequestBody(request.body), 'orchestrator'))
  })

  app.post('/requests/:id/cancel', { config: SESSION }, async (request) => {
    return cancelRequest(core, (request.params as { id: string }).id)
  })
}
