import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  type RouteOptions,
} from 'fastify'
import { auditPlugin } from './audit/plugin.ts'
import { authPlugin } from './auth/plugin.ts'
import { teamsPlugin } from './chat/msteams/plugin.ts'
import { chatPlugin } from './chat/plugin.ts'
import { clusterPlugin } from './cluster/plugin.ts'
import type { Config } from './config.ts'
import { clientErrorAnswer, RouteNotFound, toErrorBody } from './errors.ts'
import { eventsPlugin } from './events/plugin.ts'
import { connectionLimitPlugin } from './http/connection-limit.ts'
import { drainConnectionsPlugin } from './http/drain-connections.ts'
import { lingeringClosePlugin } from './http/lingering-close.ts'
import { loadSheddingPlugin } from './http/load-shedding.ts'
import { parseTrustProxy, REQUEST_ID_HEADER, requestIdGenerator } from './http/request-id.ts'
import { DebugRequestLog } from './http/request-log.ts'
import { lazyChildLogger } from './http/request-logger.ts'
import { kasmPlugin } from './kasm/plugin.ts'
import { loggerOptions } from './logger.ts'
import { metricsPlugin } from './metrics/plugin.ts'
import { notifyPlugin } from './notify/plugin.ts'
import { openapiPlugin, openapiRoutes } from './openapi/plugin.ts'
import { schemaCompilers } from './openapi/schema-compilers.ts'
import { overviewPlugin } from './overview/plugin.ts'
import { pagesPlugin } from './pages/plugin.ts'
import { reportPlugin } from './report/plugin.ts'
import { adminRoutes } from './routes/admin.ts'
import { authRoutes } from './routes/auth.ts'
import { chatLinkRoutes } from './routes/chat-links.ts'
import { consoleRoutes } from './routes/console.ts'
import { eventsRoutes } from './routes/events.ts'
import { healthRoutes, readinessPlugin } from './routes/health.ts'
import { mcpRoutes } from './routes/mcp.ts'
import { teamsRoutes } from './routes/msteams.ts'
import { overviewRoutes } from './routes/overview.ts'
import { presenceRoutes } from './routes/presence.ts'
import { reportRoutes } from './routes/report.ts'
import { signInRoutes } from './routes/signin.ts'
import { slackRoutes } from './routes/slack.ts'
import { slackLinkRoutes } from './routes/slack-link.ts'
import { sessionsPlugin } from './sessions/plugin.ts'
import { storesPlugin } from './stores/plugin.ts'
import { summaryPlugin } from './summary/plugin.ts'
import { tracingPlugin } from './tracing/plugin.ts'
import { upstreamPlugin } from './upstream/plugin.ts'
import type { Lookup } from './upstream/url-policy.ts'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    /** The level of the request lines (Fastify's, and an event stream's "request completed"). */
    requestLogLevel: 'info' | 'debug'
  }
}

/** Options for {@link buildApp}; tests pass a logger stream to assert what is (never) logged. */
export interface AppOptions {
  logger?: FastifyServerOptions['logger']
  /** DNS for the upstream URL policy (tests answer names of their own); default dns.lookup. */
  lookup?: Lookup
  /** The level of Fastify's request lines: `info` (default, production), `debug` (the demo's terminal). */
  requestLog?: 'info' | 'debug'
  /**
   * Called with every route as it is registered, before any plugin's own `onRoute` (tests: the routes the
   * OpenAPI document must describe, and a hook that checks each answer against its route's schema).
   */
  onRoute?: (route: RouteOptions) => void
}

/**
 * Builds the gateway as a Fastify instance that never listens (`server.ts` does). Plugins are registered
 * in dependency order: shared state first, then auth, then the routes that use them.
 */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    logger: options.logger ?? loggerOptions(config),
    trustProxy: parseTrustProxy(config.env.GATEWAY_TRUST_PROXY),
    // Unique across replicas (the audit stream is shared); a trusted proxy's X-Request-ID is kept.
    genReqId: requestIdGenerator(config.env.GATEWAY_TRUST_PROXY),
    bodyLimit: config.env.GATEWAY_MAX_JSON_BYTES,
    // Path checks are ours (strict, in routes/mcp): keep the router from normalising `//`; `;` is no
    // delimiter in Fastify 5 by default, so it reaches the validator.
    routerOptions: {
      ignoreDuplicateSlashes: false,
      ignoreTrailingSlash: false,
      // Counted on the raw path: an idempotency key may have 256 characters, each up to 12 when encoded
      // (`ключ` is 24); KASM_ID allows 128. The routes check the decoded values' own limits.
      maxParamLength: 3072,
    },
    requestIdHeader: false,
    childLoggerFactory: lazyChildLogger,
    ...(options.requestLog === 'debug' ? { logController: new DebugRequestLog() } : {}),
    return503OnClosing: true,
    // Fastify fails the boot when one plugin takes over 10 s. A replica starting on a loaded node (or one limited to
    // a fraction of a core) has taken that long to read the pages' three small files: a slow boot is not a broken
    // one. A plugin that never finishes still fails the boot, after a minute.
    pluginTimeout: 60_000,
    // Each route schema compiled once per process, not once per route and status that names it.
    schemaController: { compilersFactory: schemaCompilers },
    // The router's own refusals (a URL that does not decode, a parameter over maxParamLength) would answer in
    // Fastify's shape, quoting the URL: ours instead, through the same error handler as every other error.
    frameworkErrors: (err, request, reply) => answerError(app, err, request, reply),
    // Requests node's parser refuses before Fastify sees them (malformed, headers too large).
    clientErrorHandler: (err, socket) => {
      const answer = clientErrorAnswer(err)
      if (answer !== null && socket.writable) socket.end(answer)
      else socket.destroy()
    },
  })
  app.decorate('config', config)
  app.decorate('requestLogLevel', options.requestLog ?? 'info')
  if (options.onRoute !== undefined) app.addHook('onRoute', options.onRoute)
  // First of all hooks, so every answer carries it, refusals by auth or load shedding included.
  // Hooks every request passes are callback-style: an async one costs a promise and a microtask each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    done()
  })

  app.setErrorHandler((err, request, reply) => answerError(app, err as Error, request, reply))
  app.setNotFoundHandler((request, reply) => answerError(app, new RouteNotFound(), request, reply))

  // Before every route: the document is made of what each route declares.
  await app.register(openapiPlugin)
  await app.register(tracingPlugin)
  await app.register(readinessPlugin)
  await app.register(pagesPlugin, { prefix: config.routePrefix })
  await app.register(metricsPlugin)
  // Before load shedding: a connection over the cap is refused before anything else is looked at.
  await app.register(connectionLimitPlugin)
  await app.register(loadSheddingPlugin)
  await app.register(lingeringClosePlugin)
  await app.register(drainConnectionsPlugin)
  await app.register(clusterPlugin)
  // The one place that decides memory or Redis for every store; every feature after it takes its stores here.
  await app.register(storesPlugin)
  await app.register(sessionsPlugin)
  await app.register(auditPlugin)
  await app.register(authPlugin)
  await app.register(upstreamPlugin, options.lookup === undefined ? {} : { lookup: options.lookup })
  await app.register(eventsPlugin)
  await app.register(kasmPlugin)
  await app.register(summaryPlugin)
  await app.register(overviewPlugin)
  // Before attention routing, which posts through the chat adapter.
  await app.register(teamsPlugin)
  await app.register(chatPlugin)
  await app.register(notifyPlugin)
  await app.register(reportPlugin)

  await app.register(healthRoutes)
  await app.register(eventsRoutes)
  await app.register(mcpRoutes)
  // The gateway's own routes live under GATEWAY_BASE_PATH (e.g. /gateway/ on Kasm's host); the v1 routes and
  // the probes above keep their fixed paths.
  const prefix = { prefix: config.routePrefix }
  await app.register(authRoutes, prefix)
  await app.register(signInRoutes, prefix)
  await app.register(adminRoutes, prefix)
  await app.register(presenceRoutes, prefix)
  await app.register(overviewRoutes, prefix)
  await app.register(reportRoutes, prefix)
  await app.register(openapiRoutes, prefix)
  await app.register(slackRoutes, prefix)
  await app.register(teamsRoutes, prefix)
  await app.register(slackLinkRoutes, prefix)
  await app.register(chatLinkRoutes, prefix)
  await app.register(consoleRoutes, prefix)
  return app
}

/**
 * Every error answer, Fastify's own included: the one `{error, message, requestId}` body (errors.ts), as a page to a person
 * who navigated here (with a sign-in link for a 401), as JSON to everything else.
 */
function answerError(
  app: FastifyInstance,
  err: Error,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const { status, body } = toErrorBody(err, request.routeOptions.bodyLimit)
  // The router's refusals (frameworkErrors) run no hooks: the id header is set here for them.
  reply.header(REQUEST_ID_HEADER, request.id)
  // A 503 says something is unavailable (Redis, the IdP's keys, a draining replica): that is logged once
  // where it is detected, not with a stack trace per request.
  if (status >= 500 && status !== 503) request.log.error({ err }, 'request failed')
  else request.log.info({ code: body.error, status }, 'request refused')
  return app.pages.sendError(request, reply, status, body)
}
