import replyFrom from '@fastify/reply-from'
import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import type { Agent } from 'undici'
import { createUpstreamAgent } from './agent.ts'

/** The upstream side shared by the proxy routes and the event readers. */
export interface Upstream {
  /** One pooled keep-alive agent for every runtime (see {@link createUpstreamAgent}). */
  readonly agent: Agent
  /** Echoes of a messaging token masked or dropped, by where (token-echo.ts): a runtime doing it is broken. */
  readonly tokenEchoes: Counter<'where'>
}

declare module 'fastify' {
  interface FastifyInstance {
    upstream: Upstream
  }
}

/**
 * Decorates `app.upstream` with the shared agent and registers @fastify/reply-from over it (`reply.from`).
 * reply-from never destroys an agent it was given; this plugin closes it when the app closes.
 */
export const upstreamPlugin = fp(
  async (app) => {
    const agent = createUpstreamAgent(app.config.env)
    const tokenEchoes = new Counter({
      name: 'krg_upstream_token_echoes_total',
      help: 'A messaging token echoed by its runtime, masked (body, event) or dropped (header), by where',
      labelNames: ['where'],
      registers: [app.metrics.registry],
    })
    app.decorate('upstream', { agent, tokenEchoes })
    await app.register(replyFrom, {
      undici: agent,
      // Targets are full per-session URLs, validated by the routes: nothing to cache.
      disableCache: true,
      // Its info lines would log every upstream URL; failures are logged by upstream/forward.ts.
      disableRequestLogging: true,
    })
    app.addHook('onClose', async () => {
      // onClose runs after the server has stopped and its requests have ended (and after the event readers,
      // registered later, closed theirs): whatever is still open must not hold the shutdown.
      await agent.destroy()
    })
  },
  { name: 'upstream', dependencies: ['metrics'] },
)
