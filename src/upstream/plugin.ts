import replyFrom from '@fastify/reply-from'
import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import type { Agent, Dispatcher } from 'undici'
import type { Session } from '../sessions/types.ts'
import { createGuardedAgent, createUpstreamAgent, TrustRouter } from './agent.ts'
import { type Lookup, parseAllowList, UrlPolicy } from './url-policy.ts'

/** Where a session comes from when the deployer wrote it down: its upstream is not checked. */
const DEPLOYER_SOURCES: ReadonlySet<string> = new Set(['file', 'demo'])

/** The upstream side shared by the proxy routes and the event readers. */
export interface Upstream {
  /** One pooled keep-alive agent for the deployer's own runtimes (see {@link createUpstreamAgent}). */
  readonly agent: Agent
  /** The agent whose every connection the URL policy checks (see {@link createGuardedAgent}). */
  readonly guardedAgent: Agent
  /** GATEWAY_UPSTREAM_ALLOW and the default refusals, for URLs someone other than the deployer chose. */
  readonly policy: UrlPolicy
  /** Whether a session's upstream is checked on connect: not the sessions file's, the demo's or the template's. */
  guarded(session: Session): boolean
  /** The dispatcher for a session's requests: {@link guardedAgent} when {@link guarded}, else {@link agent}. */
  dispatcherFor(session: Session): Dispatcher
  /** Echoes of a messaging token masked or dropped, by where (token-echo.ts): a runtime doing it is broken. */
  readonly tokenEchoes: Counter<'where'>
}

declare module 'fastify' {
  interface FastifyInstance {
    upstream: Upstream
  }
}

/** Options of {@link upstreamPlugin}: tests give DNS answers of their own. */
export interface UpstreamPluginOptions {
  readonly lookup?: Lookup
}

/**
 * Decorates `app.upstream` (the agents, the URL policy) and registers @fastify/reply-from over both agents
 * (`reply.from`). reply-from never destroys an agent it was given; this plugin closes them when the app closes.
 */
export const upstreamPlugin = fp<UpstreamPluginOptions>(
  async (app, options) => {
    const env = app.config.env
    const template = env.GATEWAY_UPSTREAM_TEMPLATE
    const policy = new UrlPolicy({
      allow: parseAllowList(env.GATEWAY_UPSTREAM_ALLOW),
      // The template's origin is the deployer's: what it builds is trusted, and so is an explicit upstream there.
      trustedOrigins: template === undefined ? [] : [new URL(template.replaceAll('{kasmId}', 'x')).origin],
      ...(options.lookup === undefined ? {} : { lookup: options.lookup }),
    })
    const agent = createUpstreamAgent(env)
    const guardedAgent = createGuardedAgent(env, policy)
    // Only the deployer's own configuration is trusted: the sessions file, the demo, and the template's origin.
    // Everything else (the admin API, and any later source such as Kasm's API) someone else chose.
    const guarded = (session: Session): boolean =>
      !DEPLOYER_SOURCES.has(session.source) && !policy.trusts(session.upstream)
    const tokenEchoes = new Counter({
      name: 'krg_upstream_token_echoes_total',
      help: 'A messaging token echoed by its runtime, masked (body, event) or dropped (header), by where',
      labelNames: ['where'],
      registers: [app.metrics.registry],
    })
    app.decorate('upstream', {
      agent,
      guardedAgent,
      policy,
      guarded,
      dispatcherFor: (session) => (guarded(session) ? guardedAgent : agent),
      tokenEchoes,
    } satisfies Upstream)
    await app.register(replyFrom, {
      undici: new TrustRouter(agent, guardedAgent),
      // Its URL cache keeps the parse of each target (full per-session URLs, validated by the routes): a
      // session's inbox, messages and files are asked for over and over, and a parse per request cost more
      // than the lookup. Bounded (least recently used first out), so unique paths only churn it.
      cacheURLs: 1024,
      // Its info lines would log every upstream URL; failures are logged by upstream/forward.ts.
      disableRequestLogging: true,
    })
    app.addHook('onClose', async () => {
      // onClose runs after the server has stopped and its requests have ended (and after the event readers,
      // registered later, closed theirs): whatever is still open must not hold the shutdown.
      await Promise.all([agent.destroy(), guardedAgent.destroy()])
    })
  },
  { name: 'upstream', dependencies: ['metrics'] },
)
