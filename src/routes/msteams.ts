import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { JWTPayload } from 'jose'
import { platformFailures } from '../auth/address-failures.ts'
import { teamsActivitySchema } from '../chat/msteams/activity.ts'
import { TeamsKeysUnavailable } from '../chat/msteams/auth.ts'
import { notifyEntry } from '../chat/msteams/bot.ts'
import { allowedServiceBase } from '../chat/msteams/service-url.ts'
import { MsteamsKeysUnavailable, MsteamsUnauthorized, MsteamsUnauthorizedRateLimited } from '../errors.ts'
import { MSTEAMS } from '../openapi/routes/msteams.ts'
import { zodInput } from '../openapi/zod-input.ts'

/** Teams' activities are far smaller (an invoke's card inputs included); the limit bounds what anyone posts. */
export const MAX_ACTIVITY_BYTES = 256 * 1024

/**
 * `POST <base>teams/messages`, the Teams bot's messaging endpoint, and `GET <base>admin/msteams/conversations`.
 *
 * The bearer token is checked before the body is read (a request without a valid one is refused 401 unread);
 * then the activity must match it (its `serviceUrl` the token's `serviceurl`, Teams, our tenant), else 401
 * too, and nothing is acted on. The reason of a refusal is logged (debug) and counted, never told. Refusals
 * are counted per client address (across replicas): past the limit they are answered 429, but every activity
 * is still checked, so a valid one from a limited address (Microsoft's, shared by every bot) is still served.
 */
export async function teamsRoutes(app: FastifyInstance): Promise<void> {
  const teams = app.msteams
  if (teams === null) return
  const { metrics, bearer } = teams
  const counted = metrics.activities
  const claimsOf = new WeakMap<FastifyRequest, JWTPayload>()
  const env = app.config.env
  const failures = platformFailures(app.stores.msteamsBearerFailures, 'Teams bearer tokens', app.log)
  /** Refuses an activity whose bearer (or its match) failed: 401, or 429 once its address is over the limit. */
  const refuse = async (request: FastifyRequest, reply: FastifyReply, reason: string): Promise<never> => {
    request.log.debug({ reason }, 'teams: activity refused')
    const wait = await failures.refused(request.ip)
    if (wait > 0) {
      counted.inc({ type: 'unverified', outcome: 'rate_limited' })
      reply.header('retry-after', String(wait))
      throw new MsteamsUnauthorizedRateLimited(String(wait))
    }
    counted.inc({ type: 'unverified', outcome: 'unauthorized' })
    throw new MsteamsUnauthorized()
  }

  // The activity's schema is both the check and the document's description of the body.
  const input = zodInput({ body: teamsActivitySchema })
  const config: FastifyContextConfig = { rateLimit: false, anonymousLimit: false, ...input.config }
  app.post(
    '/teams/messages',
    {
      schema: MSTEAMS.messages,
      config,
      bodyLimit: MAX_ACTIVITY_BYTES,
      // Before the body is read: a request not signed for this bot costs a signature check, never a parse.
      onRequest: async (request, reply) => {
        let result: Awaited<ReturnType<typeof bearer.verify>>
        try {
          result = await bearer.verify(request.headers.authorization)
        } catch (err) {
          if (!(err instanceof TeamsKeysUnavailable)) throw err
          counted.inc({ type: 'unverified', outcome: 'unavailable' })
          request.log.warn({ err: err.message }, 'teams: signing keys unavailable; activity refused')
          throw new MsteamsKeysUnavailable()
        }
        if (!result.ok) await refuse(request, reply, result.reason)
        else claimsOf.set(request, result.claims)
      },
    },
    async (request, reply) => {
      const claims = claimsOf.get(request)
      if (claims === undefined) throw new MsteamsUnauthorized()
      let activity: ReturnType<typeof input.body>
      try {
        activity = input.body(request)
      } catch (err) {
        // Signed, but not an activity we can read (400 bad_request): nothing is acted on.
        counted.inc({ type: 'other', outcome: 'invalid' })
        throw err
      }
      const mismatch = bearer.matches(claims, activity)
      if (mismatch !== undefined) await refuse(request, reply, mismatch)
      let handled: Awaited<ReturnType<typeof teams.bot.handle>>
      try {
        handled = await teams.bot.handle(activity)
      } catch (err) {
        const type = ['message', 'conversationUpdate', 'invoke'].includes(activity.type)
          ? activity.type
          : 'other'
        counted.inc({ type, outcome: 'failed' })
        throw err
      }
      if (handled.counted !== true) counted.inc({ type: handled.type, outcome: handled.outcome })
      reply.code(handled.status)
      return handled.body === undefined ? reply.send() : reply.send(handled.body)
    },
  )

  app.get(
    '/admin/msteams/conversations',
    { schema: MSTEAMS.conversations, onRequest: app.requireAccess('admin') },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store')
      const conversations = (await teams.installations.list()).map((i) => ({
        ...i,
        serviceUrlAllowed:
          allowedServiceBase(i.serviceUrl, env.GATEWAY_TEAMS_SERVICE_URLS, app.config.production) !== null,
        notifyEntry: notifyEntry(i.conversationId, i.serviceUrl),
      }))
      return { conversations }
    },
  )
}
