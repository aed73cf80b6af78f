import fp from 'fastify-plugin'
import { HEALTH } from '../openapi/routes/health.ts'

/**
 * A readiness check: resolves when usable, throws (with a reason in its message) when not, or throws
 * {@link Degraded} when its dependency is away but the replica still serves without it.
 */
export type ReadinessCheck = () => Promise<void>

/**
 * Thrown by a readiness check whose dependency is away while the replica still serves what does not need it:
 * `/readyz` stays 200 and says `degraded` (see docs/cluster.md), so that an outage every replica shares does
 * not take them all out of the balancer at once.
 */
export class Degraded extends Error {
  override readonly name = 'Degraded'
}

/** What `/readyz` reports: `ready` decides the status code; `degraded` names the checks that degrade it. */
export interface ReadinessResult {
  ready: boolean
  degraded: string[]
  checks: Record<string, string>
}

/** Named readiness checks that plugins add; `/readyz` runs them all. */
export interface Readiness {
  add(name: string, check: ReadinessCheck): void
  /** Marks the replica as draining: `/readyz` fails from now on so the balancer stops sending. */
  drain(): void
  readonly draining: boolean
  run(): Promise<ReadinessResult>
}

declare module 'fastify' {
  interface FastifyInstance {
    readiness: Readiness
  }
}

function createReadiness(): Readiness {
  const checks = new Map<string, ReadinessCheck>()
  let draining = false
  return {
    add: (name, check) => void checks.set(name, check),
    drain: () => {
      draining = true
    },
    get draining() {
      return draining
    },
    async run() {
      const out: Record<string, string> = {}
      const degraded: string[] = []
      let ready = !draining
      if (draining) out.shutdown = 'draining'
      await Promise.all(
        [...checks].map(async ([name, check]) => {
          try {
            await check()
            out[name] = 'ok'
          } catch (err) {
            if (err instanceof Degraded) degraded.push(name)
            else ready = false
            out[name] = err instanceof Degraded ? `degraded: ${err.message}` : (err as Error).message
          }
        }),
      )
      return { ready, degraded: degraded.sort(), checks: out }
    },
  }
}

/** Registers the readiness registry first so every later plugin can add its checks. */
export const readinessPlugin = fp(
  async (app) => {
    app.decorate('readiness', createReadiness())
  },
  { name: 'readiness' },
)

/** The probes' and the scrape's paths: they keep answering under load and make no trace spans. */
export const PROBE_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

/** `/healthz` (the process answers), `/readyz` (config, registry and stores usable), `/metrics`. */
export async function healthRoutes(app: import('fastify').FastifyInstance): Promise<void> {
  app.get('/healthz', { schema: HEALTH.healthz }, async () => ({ status: 'ok' }))
  app.get('/readyz', { schema: HEALTH.readyz }, async (_request, reply) => {
    const result = await app.readiness.run()
    const status = !result.ready ? 'not_ready' : result.degraded.length > 0 ? 'degraded' : 'ready'
    return reply.code(result.ready ? 200 : 503).send({ status, ...result })
  })
  app.get('/metrics', { schema: HEALTH.metrics }, async (_request, reply) => {
    reply.type(app.metrics.registry.contentType)
    return app.metrics.registry.metrics()
  })
}
