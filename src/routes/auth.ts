import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Operator } from '../auth/operator.ts'
import { toClaims } from '../identity/people.ts'
import { AUTH } from '../openapi/routes/auth.ts'

/** What `/auth/me` and `POST /auth/session` answer: who the credential says you are, never the credential. */
export interface MeBody {
  sub: string
  name?: string
  roles: string[]
  teams: string[]
  via: Operator['via']
  /** ISO 8601: when the credential (token `exp` or cookie session) ends. */
  expiresAt: string
}

function me(operator: Operator): MeBody {
  return {
    sub: operator.sub,
    ...(operator.name === undefined ? {} : { name: operator.name }),
    roles: [...operator.roles],
    teams: [...operator.teams],
    via: operator.via,
    expiresAt: new Date(operator.expiresAt).toISOString(),
  }
}

/**
 * `/auth/*` for programs and the console: exchange a bearer for a cookie session, see who you are, sign out.
 * None of these needs a role: an operator without one can still see that they have none. People sign in
 * through routes/signin.ts.
 */
export async function authRoutes(app: FastifyInstance): Promise<void> {
  // Identities and Set-Cookie answers must never sit in a shared cache (this plugin is encapsulated).
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // Authentication runs in onRequest, before any body is read; the rate limit (preHandler) then counts per
  // operator.
  const bearerOnly = async (request: FastifyRequest) => void (await app.auth.authenticate(request, 'bearer'))
  const anyCredential = async (request: FastifyRequest) => void (await app.auth.authenticate(request))
  // Starting and ending a cookie session are audited; `auth/me` is a read.
  const sessionAudit = { audit: 'auth/session' }
  const cookieWrite = async (request: FastifyRequest) =>
    app.auth.checkCsrf(request, await app.auth.authenticate(request, 'cookie'))

  // A browser's EventSource cannot send a bearer: the UI trades its token for an HttpOnly cookie here.
  app.post(
    '/auth/session',
    { schema: AUTH.startSession, onRequest: bearerOnly, config: sessionAudit },
    async (request, reply) => {
      const operator = request.operator!
      const session = await app.auth.cookies.start(reply, toClaims(operator), operator.expiresAt)
      return reply.code(201).send(me(session))
    },
  )

  app.get('/auth/me', { schema: AUTH.me, onRequest: anyCredential }, async (request) => me(request.operator!))

  app.delete(
    '/auth/session',
    { schema: AUTH.endSession, onRequest: cookieWrite, config: sessionAudit },
    async (request, reply) => {
      await app.auth.cookies.end(request, reply)
      return reply.code(204).send()
    },
  )
}
