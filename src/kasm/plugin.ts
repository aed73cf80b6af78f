import fp from 'fastify-plugin'
import { Counter, Gauge } from 'prom-client'
import { ConfigError } from '../config.ts'
import { KasmRefused } from '../errors.ts'
import { Secret } from '../sessions/secret.ts'
import type { Session } from '../sessions/types.ts'
import { KasmClient } from './client.ts'
import { type Destroyed, destroyLaunched } from './destroy.ts'
import { KasmLauncher } from './launch.ts'
import type { StaleSessions } from './stale.ts'
import { KasmSync } from './sync.ts'
import { loadLaunchPolicy } from './teams.ts'
import { parseZones, type UpstreamRules } from './upstream.ts'

/** Kasm's lifecycle as the admin routes see it. */
export interface KasmService {
  readonly launcher: KasmLauncher
  /** Ends a launched session in Kasm (see {@link destroyLaunched}); the caller then unregisters it. */
  readonly destroy: (session: Session) => Promise<Destroyed>
  /** Null when GATEWAY_KASM_SYNC_S is 0. */
  readonly sync: KasmSync | null
  readonly stale: StaleSessions
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Launch and sync through Kasm's Developer API; null without GATEWAY_KASM_API_URL. */
    kasm: KasmService | null
  }
}

/** The name of the sync's job lease. */
export const SYNC_JOB = 'kasm-sync'

/**
 * Decorates `app.kasm` when GATEWAY_KASM_API_URL is set: the launcher behind `POST /admin/sessions` (with the
 * teams' launch policy, GATEWAY_KASM_TEAMS_FILE, read at boot and on SIGHUP), the destroy behind `DELETE`, and
 * the sync, a leased job (one replica at a time) that reconciles the registry with Kasm every
 * GATEWAY_KASM_SYNC_S. Kasm being unreachable changes nothing: the failure is logged once per outage,
 * counted, and retried after 1 s, 2 s, 4 s … up to the sync interval.
 */
export const kasmPlugin = fp(
  async (app) => {
    const env = app.config.env
    if (!env.GATEWAY_KASM_API_URL || !env.GATEWAY_KASM_API_KEY || !env.GATEWAY_KASM_API_SECRET) {
      app.decorate('kasm', null)
      return
    }
    const registers = [app.metrics.registry]
    const calls = new Counter({
      name: 'krg_kasm_api_calls_total',
      help: "Calls of Kasm's Developer API by call and outcome (ok, refused, unreachable, bad_answer)",
      labelNames: ['call', 'outcome'],
      registers,
    })
    const client = new KasmClient({
      url: env.GATEWAY_KASM_API_URL,
      key: new Secret(env.GATEWAY_KASM_API_KEY),
      secret: new Secret(env.GATEWAY_KASM_API_SECRET),
      auth: env.GATEWAY_KASM_API_AUTH,
      timeoutMs: env.GATEWAY_KASM_API_TIMEOUT_MS,
      userAgent: `kasm-runtime-gateway (${app.stores.replicaId})`,
      onCall: (call, outcome) => calls.inc({ call, outcome }),
    })
    const rules: UpstreamRules = {
      mode: env.GATEWAY_KASM_UPSTREAM,
      template: env.GATEWAY_UPSTREAM_TEMPLATE,
      statusTemplate: env.GATEWAY_KASM_STATUS_UPSTREAM,
      zones: parseZones(env.GATEWAY_KASM_ZONE_UPSTREAMS),
    }
    const launches = new Counter({
      name: 'krg_kasm_launches_total',
      help: 'Sessions launched through POST /admin/sessions, by result (launched, failed, timeout)',
      labelNames: ['result'],
      registers,
    })
    const log = app.log.child({ component: 'kasm' })
    const teamsFile = env.GATEWAY_KASM_TEAMS_FILE
    let launchPolicy = await loadLaunchPolicy(teamsFile, env.GATEWAY_KASM_USER_ID)
    if (teamsFile !== undefined) log.info({ teamsFile, teams: launchPolicy.size }, 'Kasm teams file applied')
    if (!launchPolicy.everyTeamHasUser())
      log.warn(
        'launches are refused for teams without a kasmUserId in GATEWAY_KASM_TEAMS_FILE (GATEWAY_KASM_USER_ID is not set)',
      )
    if (teamsFile !== undefined) {
      let reloading = Promise.resolve()
      const reload = (): void => {
        reloading = reloading.then(async () => {
          try {
            launchPolicy = await loadLaunchPolicy(teamsFile, env.GATEWAY_KASM_USER_ID)
            log.info({ teamsFile, teams: launchPolicy.size }, 'Kasm teams file applied')
          } catch (err) {
            const reason = err instanceof ConfigError ? err.message : String((err as Error).message)
            log.error({ teamsFile, reason }, 'Kasm teams file reload failed; keeping the previous rules')
          }
        })
      }
      process.on('SIGHUP', reload)
      app.addHook('onClose', async () => {
        process.off('SIGHUP', reload)
        await reloading
      })
    }
    const launcher = new KasmLauncher({
      client,
      sessions: app.sessions,
      policy: app.upstream.policy,
      launchPolicy: () => launchPolicy,
      rules,
      idForm: env.GATEWAY_KASM_ID_FORM,
      sidebar: env.GATEWAY_KASM_SIDEBAR,
      publicOrigin: env.GATEWAY_KASM_PUBLIC_URL ?? client.origin,
      addressTimeoutMs: env.GATEWAY_KASM_LAUNCH_TIMEOUT_S * 1000,
      log,
      onLaunch: (result) => launches.inc({ result }),
    })
    const destroy = (session: Session): Promise<Destroyed> => destroyLaunched(client, session)
    const stale = app.stores.staleSessions()
    new Gauge({
      name: 'krg_kasm_stale_sessions',
      help: 'Hand-registered sessions Kasm does not list (flagged in the admin API, never removed)',
      registers,
      async collect() {
        this.set(
          await stale.all().then(
            (all) => all.size,
            () => 0,
          ),
        )
      },
    })
    if (env.GATEWAY_KASM_SYNC_S === 0) {
      app.decorate('kasm', { launcher, destroy, sync: null, stale })
      return
    }

    const sync = new KasmSync({
      client,
      sessions: app.sessions,
      policy: app.upstream.policy,
      stale,
      audit: app.audit,
      rules,
      log,
    })
    const runs = new Counter({
      name: 'krg_kasm_sync_runs_total',
      help: 'Reconciliations with Kasm by result (ok; failed: Kasm unreachable or its answer unusable)',
      labelNames: ['result'],
      registers,
    })
    const removed = new Counter({
      name: 'krg_kasm_sessions_removed_total',
      help: 'Sessions the Kasm sync removed because Kasm no longer had them',
      registers,
    })
    const holding = new Gauge({
      name: 'krg_kasm_sync_holder',
      help: 'Whether this replica runs the Kasm sync now (1) or not (0)',
      registers,
    })
    holding.set(0)
    const intervalMs = env.GATEWAY_KASM_SYNC_S * 1000
    let failing = 0
    const job = app.stores.leasedJob({
      name: SYNC_JOB,
      nextRunMs: (failures) =>
        failures === 0 ? intervalMs : Math.min(1000 * 2 ** (failures - 1), intervalMs),
      log,
      onHolder: (held) => holding.set(held ? 1 : 0),
      run: async ({ signal }) => {
        try {
          const outcome = await sync.run(signal)
          runs.inc({ result: 'ok' })
          if (outcome.removed.length > 0) removed.inc(outcome.removed.length)
          if (failing > 0) log.info({ failures: failing }, 'Kasm sync works again')
          failing = 0
        } catch (err) {
          runs.inc({ result: 'failed' })
          // Once per outage: the metric counts every attempt, the log does not repeat itself.
          if (failing++ === 0 && !signal.aborted) {
            const reason = err instanceof Error ? err.message : String(err)
            log.warn(
              { reason, refused: err instanceof KasmRefused },
              'Kasm sync failed; nothing changed, retrying with backoff',
            )
          }
          throw err
        }
      },
    })
    app.decorate('kasm', { launcher, destroy, sync, stale })
    app.addHook('onReady', async () => job.start())
    app.addHook('preClose', () => job.stop())
  },
  { name: 'kasm', dependencies: ['metrics', 'sessions', 'audit', 'stores'] },
)
