import type { FastifyInstance } from 'fastify'
import { registerBodyParsers } from '../upstream/body.ts'
import { handleV1 } from '../upstream/handler.ts'
import { extraReadRoutes, SESSION_PREFIX, V1_ROUTES } from '../upstream/routes.ts'

/**
 * The Sidebar protocol v1 surface under `/desktop/:kasmId/mcp/` (events excepted: routes/events.ts): every
 * route of the v1 table plus GATEWAY_EXTRA_READ_ROUTES, each behind `requireAccess` (GET: read, POST: write; as an onRequest hook),
 * each forwarded by upstream/handler.ts. Anything else under the prefix is a 404 from the not-found handler.
 *
 * An encapsulated plugin: its body parsers (raw JSON, streamed multipart, nothing else) apply to these routes.
 */
export async function mcpRoutes(app: FastifyInstance): Promise<void> {
  const env = app.config.env
  registerBodyParsers(app, {
    maxJsonBytes: env.GATEWAY_MAX_JSON_BYTES,
    maxAttachmentBytes: env.GATEWAY_MAX_ATTACHMENT_BYTES,
  })
  for (const route of [...V1_ROUTES, ...extraReadRoutes(env.GATEWAY_EXTRA_READ_ROUTES)]) {
    app.route({
      method: route.method,
      url: `${SESSION_PREFIX}${route.url}`,
      // v1 defines GETs only; a HEAD would be forwarded as a request the protocol does not have.
      exposeHeadRoute: false,
      // Authenticated before the body is parsed: an anonymous request gets 401, not 413/415, and is never read.
      onRequest: app.requireAccess(route.access),
      // Writes are audited under the route's name; reads are not.
      config: route.access === 'write' ? { audit: route.name } : {},
      handler: (request, reply) => handleV1(app, route, request, reply),
    })
  }
}
