import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { extraReadRoutes, SESSION_PREFIX, V1_ROUTES } from '../upstream/routes.ts'
import { version } from '../version.ts'
import { ERRORS, object, SECURITY, SHARED_SCHEMAS } from './schemas.ts'
import { v1Paths } from './v1-paths.ts'

/**
 * Routes left out of the document, by URL after the base path, and why: the console's bundled files
 * (hashed names that change with every build) and the pages' stylesheet are static assets, not an API.
 */
export const HIDDEN_ROUTES: ReadonlyMap<string, string> = new Map([
  ['/assets/:file', "the console's bundled files: static, hashed names"],
  ['/pages/pages.css', "the pages' stylesheet: a static asset"],
])

/**
 * The OpenAPI 3.1 document of the gateway (@fastify/swagger): every route's `schema` (its parameters, body
 * and answers, the same objects that validate and serialise it), the shared error answer, and the Sidebar
 * protocol v1 routes, which are forwarded without schemas and described from the protocol (v1-paths.ts).
 * Registered before every route so that its `onRoute` sees them all; building the document costs nothing on
 * a request (it is made once, when first asked, and cached by the plugin).
 */
export const openapiPlugin = fp(
  async (app: FastifyInstance) => {
    for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
    const { config } = app
    const v1 = [...V1_ROUTES, ...extraReadRoutes(config.env.GATEWAY_EXTRA_READ_ROUTES)]
    const hidden = new Set([...HIDDEN_ROUTES.keys()].map((url) => `${config.routePrefix}${url}`))
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'kasm-runtime-gateway',
          version,
          description:
            'The gateway’s own routes and the Sidebar protocol v1 routes it forwards to each session’s runtime. Generated from the routes’ schemas (`npm run docs:openapi`); see docs/api.md.',
          license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
        },
        components: {
          securitySchemes: {
            bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
            cookie: { type: 'apiKey', in: 'cookie', name: config.cookieName },
          },
        },
        tags: [
          { name: 'v1', description: 'Sidebar protocol v1, forwarded to the session’s runtime' },
          { name: 'console', description: 'the console’s API and pages' },
          { name: 'admin', description: 'role admin, limited to the admin’s teams' },
          { name: 'auth', description: 'sign-in, sign-out, who you are' },
          { name: 'chat', description: 'Slack’s Request URL and linked chat accounts' },
          { name: 'health', description: 'probes and metrics' },
        ],
        paths: v1Paths(v1),
      },
      refResolver: {
        // Shared schemas keep their `$id` as their component name (`#/components/schemas/ErrorAnswer`).
        buildLocalReference: (json, _baseUri, _fragment, i) =>
          typeof json.$id === 'string' ? json.$id : `def-${i}`,
      },
      transform: ({ schema, url }) => {
        // The forwarded routes and the event stream are described by v1Paths; the assets are no API.
        if (url.startsWith(SESSION_PREFIX.split(':')[0] as string) || hidden.has(url))
          return { schema: { ...schema, hide: true }, url }
        return { schema, url }
      },
    })
  },
  { name: 'openapi' },
)

/** `GET <base>api/openapi.json`: the document, for anyone signed in (any role). */
export async function openapiRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/api/openapi.json',
    {
      onRequest: app.requireAccess('read'),
      schema: {
        tags: ['console'],
        summary: 'This document (OpenAPI 3.1)',
        security: SECURITY,
        response: {
          200: {
            description: 'the OpenAPI document',
            content: { 'application/json': { schema: OPENAPI_DOCUMENT } },
          },
          ...ERRORS,
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'private, no-cache')
      return app.swagger()
    },
  )
}

/** The document's top level (its parts are described by the OpenAPI 3.1 specification itself). */
const OPENAPI_DOCUMENT = {
  ...object(
    {
      openapi: { type: 'string' },
      info: { type: 'object', additionalProperties: true },
      components: { type: 'object', additionalProperties: true },
      paths: { type: 'object', additionalProperties: true },
      tags: { type: 'array', items: { type: 'object', additionalProperties: true } },
    },
    ['openapi', 'info', 'paths'],
  ),
}
