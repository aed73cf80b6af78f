import fp from 'fastify-plugin'

/** A readiness check: resolves when usable, throws (with a reason in its message) when not. */
export type ReadinessCheck = () => Promise<void>

/** Named readiness checks that plugins add; `/readyz` runs them all. */
export interface Readiness {
  add(name: string, check: ReadinessCheck): void
  /** Marks the replica as draining: `/readyz` fails from now on so the balancer stops sending. */
  drain(): void
  readonly draining: boolean
  run(): Promise<{ ready: boolean; checks: Record<string, string> }>
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
      let ready = !draining
      if (draining) out.shutdown = 'draining'
      await Promise.all(
        [...checks].map(async ([name, check]) => {
          try {
            await check()
            out[name] = 'ok'
          } catch (err) {
            ready = false
            out[name] = (err as Error).message
          }
        }),
      )
      return { ready, checks: out }
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

/** `/healthz` (the process answers), `/readyz` (config, registry and stores usable), `/metrics`. */
export async function healthRoutes(app: import('fastify').FastifyInstance): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const result = await app.readiness.run()
    return reply
      .code(result.ready ? 200 : 503)
      .send({ status: result.ready ? 'ready' : 'not_ready', ...result })
  })
  app.get('/metrics', async (_request, reply) => {
    reply.type(app.metrics.registry.contentType)
    return app.metrics.registry.metrics()
  })
}
