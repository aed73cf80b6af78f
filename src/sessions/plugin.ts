import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import { ConfigError } from '../config.ts'
import { RegistryUnreadable } from '../errors.ts'
import { loadSessionsFile } from './file.ts'
import { registerSessionsGauge } from './metrics.ts'
import { StoreSessionRegistry } from './registry.ts'
import type { SessionRegistry } from './types.ts'
import { upstreamFromTemplate } from './validate.ts'

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionRegistry
  }
}

/**
 * Decorates `app.sessions`. With GATEWAY_SESSIONS_FILE, loads it at boot (a bad file stops the boot with a
 * ConfigError) and again on SIGHUP (a bad file is logged and the previous sessions kept).
 */
export const sessionsPlugin = fp(
  async (app) => {
    const { GATEWAY_SESSIONS_FILE: file, GATEWAY_UPSTREAM_TEMPLATE: template } = app.config.env
    if (template !== undefined) {
      const probe = upstreamFromTemplate(template, 'probe')
      if (probe && !probe.ok)
        throw new ConfigError(`invalid configuration: GATEWAY_UPSTREAM_TEMPLATE: ${probe.reason}`)
    }

    const store = app.stores.sessions
    app.addHook('onClose', () => store.close())

    const registry = new StoreSessionRegistry(store, template === undefined ? {} : { template })
    app.decorate('sessions', registry)
    registerSessionsGauge(app.metrics.registry, () => registry.list())

    let loaded = file === undefined
    /** Why the sessions file is not applied, when the registry refused it. */
    let refused: string | undefined
    app.readiness.add('sessions', async () => {
      await store.ready()
      if (!loaded) throw new Error(refused ?? 'sessions file not loaded')
    })
    if (file === undefined) return

    const reloads = new Counter({
      name: 'krg_sessions_file_reloads_total',
      help: 'Reloads of GATEWAY_SESSIONS_FILE on SIGHUP, by outcome (applied, failed)',
      labelNames: ['outcome'],
      registers: [app.metrics.registry],
    })
    const load = async (): Promise<void> => {
      const entries = await loadSessionsFile(file, template === undefined ? {} : { template })
      const result = await registry.applyFile(entries)
      app.log.info({ sessionsFile: file, sessions: entries.length, ...result }, 'sessions file applied')
      if (result.shadowed.length > 0)
        app.log.warn(
          { sessionsFile: file, shadowed: result.shadowed },
          'sessions file entries ignored: an admin-registered session holds the same kasmId',
        )
    }
    try {
      await load()
      loaded = true
    } catch (err) {
      // A replica that cannot open the stored records must not seal the file's sessions with its key; it
      // boots not ready instead, and SIGHUP applies the file once the records open or are deleted.
      if (!(err instanceof RegistryUnreadable)) throw err
      refused = `sessions file not applied: ${err.message}`
      app.log.error({ sessionsFile: file, reason: err.message }, 'sessions file not applied')
    }

    const reloader = createReloader(app, async () => {
      try {
        await load()
        loaded = true
        refused = undefined
        reloads.inc({ outcome: 'applied' })
      } catch (err) {
        reloads.inc({ outcome: 'failed' })
        // Our own messages only (ConfigError names file and entry, never a value); keep the old set.
        const reason = err instanceof ConfigError ? err.message : String((err as Error).message)
        app.log.error(
          { sessionsFile: file, reason },
          'sessions file reload failed; keeping the previous sessions',
        )
      }
    })
    process.on('SIGHUP', reloader.trigger)
    app.addHook('onClose', async () => {
      process.off('SIGHUP', reloader.trigger)
      await reloader.idle()
    })
  },
  { name: 'sessions', dependencies: ['readiness', 'metrics', 'stores'] },
)

/**
 * Runs `reload` once per trigger, never two at once: a signal during a reload schedules exactly one more,
 * so the last edit of the file is always the one applied.
 */
function createReloader(app: FastifyInstance, reload: () => Promise<void>) {
  let running: Promise<void> | undefined
  let again = false
  const run = async (): Promise<void> => {
    do {
      again = false
      await reload()
    } while (again)
    running = undefined
  }
  return {
    trigger: (): void => {
      app.log.info('SIGHUP: reloading the sessions file')
      if (running) again = true
      else running = run()
    },
    idle: async (): Promise<void> => {
      await running
    },
  }
}
