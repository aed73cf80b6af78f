import fp from 'fastify-plugin'
import { Counter } from 'prom-client'
import { Agent } from 'undici'
import { ChatOutbox } from '../chat/outbox.ts'
import { ConfigError } from '../config.ts'
import { sessionPath } from '../console/links.ts'
import { Escalations } from '../escalation/engine.ts'
import { Fanout } from '../escalation/fanout.ts'
import { createEscalationMetrics } from '../escalation/metrics.ts'
import type { DeliveryLedger } from './ledger.ts'
import { createNotifyMetrics } from './metrics.ts'
import { Outbox } from './outbox.ts'
import {
  allTargets,
  type ChatTarget,
  checkTargets,
  globalTargets,
  loadNotifyFile,
  type NotifyRoutes,
  type PersonTarget,
} from './targets.ts'
import { NotifyWatcher } from './watcher.ts'

/** Attention routing as the admin API sees it. */
export interface Notifications {
  readonly ledger: DeliveryLedger
  readonly watcher: NotifyWatcher
  readonly outbox: Outbox
  /** The escalation engine (steps, claims). */
  readonly escalations: Escalations
  /** The routes now. */
  routes(): NotifyRoutes
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Webhook notifications (src/notify); null when no route is configured. */
    notifications: Notifications | null
  }
}

/**
 * Attention routing: with GATEWAY_NOTIFY_URL or GATEWAY_NOTIFY_FILE, every session with a route is watched
 * (its summary folded, its stream read even with no viewer) and the replica reading it sends webhooks when a
 * question opens or closes, a handoff starts or ends, or a run ends needing a person. The webhook URLs pass
 * the URL policy at boot (a refused one stops the boot naming the variable or the file entry) and on every
 * connection. The notify file is reloaded on SIGHUP with the sessions file (a bad one is logged and the
 * previous routes kept).
 */
export const notifyPlugin = fp(
  async (app) => {
    const env = app.config.env
    const file = env.GATEWAY_NOTIFY_FILE
    if (env.GATEWAY_NOTIFY_URL.length === 0 && file === undefined) {
      app.decorate('notifications', null)
      return
    }
    const policy = app.upstream.policy
    const chat = app.chat
    const load = async (): Promise<NotifyRoutes> => {
      const channels = new Map<string, ChatTarget[]>()
      const people = new Map<string, PersonTarget[]>()
      const routes: NotifyRoutes = {
        global: globalTargets(env),
        teams: file === undefined ? new Map() : await loadNotifyFile(file, env, channels, people),
        chat: channels,
        people,
      }
      await checkTargets(policy, routes, file)
      return routes
    }
    /** Every target's label, the chat channels' included (the series that exist from the first scrape). */
    const labels = (r: NotifyRoutes): string[] => [
      ...allTargets(r).map((t) => t.label),
      ...[...(r.chat?.values() ?? [])].flat().map((t) => t.label),
    ]
    let routes = await load()

    const ledger = app.stores.deliveryLedger()
    const dispatcher = new Agent({
      connect: policy.connector({ timeout: env.GATEWAY_NOTIFY_TIMEOUT_MS }),
      headersTimeout: env.GATEWAY_NOTIFY_TIMEOUT_MS,
      bodyTimeout: env.GATEWAY_NOTIFY_TIMEOUT_MS,
      connections: 4,
    })
    let outbox: Outbox | null = null
    let chatOutbox: ChatOutbox | null = null
    const metrics = createNotifyMetrics(
      app.metrics.registry,
      () => (outbox?.held ?? 0) + (chatOutbox?.held ?? 0),
    )
    metrics.initialise(labels(routes))
    const log = app.log.child({ component: 'notify' })
    outbox = new Outbox({
      ledger,
      dispatcher,
      timeoutMs: env.GATEWAY_NOTIFY_TIMEOUT_MS,
      retryMs: env.GATEWAY_NOTIFY_RETRY_MS,
      retryForMs: env.GATEWAY_NOTIFY_RETRY_FOR_S * 1000,
      metrics,
      log,
      quiet: app.stores.down,
    })
    const sending = outbox
    chatOutbox =
      chat === null
        ? null
        : new ChatOutbox({
            ledger,
            deliver: (job) => chat.deliver(job),
            metrics,
            log,
            retryMs: env.GATEWAY_NOTIFY_RETRY_MS,
            retryForMs: env.GATEWAY_NOTIFY_RETRY_FOR_S * 1000,
            quiet: app.stores.down,
          })
    const posting = chatOutbox
    const origin = env.GATEWAY_PUBLIC_ORIGIN ?? ''
    const reading = (kasmId: string): boolean => app.events.streams.reader(kasmId) !== null
    const fanout = new Fanout({
      routes: () => routes,
      send: (job) => void sending.enqueue(job),
      ...(posting === null ? {} : { sendChat: (job) => void posting.enqueue(job) }),
      links: app.people.links,
      link: (kasmId, focus) => `${origin}${sessionPath(app.config.basePath, kasmId, focus)}`,
    })
    const escalations = new Escalations({
      board: app.board,
      reading,
      routes: () => routes,
      chat: posting !== null,
      fanout,
      claimTtlMs: env.GATEWAY_CLAIM_TTL_S * 1000,
      metrics: createEscalationMetrics(app.metrics.registry),
      log: log.child({ part: 'escalation' }),
    })
    const watcher = new NotifyWatcher({
      summaries: app.summaries,
      sessions: app.sessions,
      reading,
      escalations,
      chat: posting !== null,
      routes: () => routes,
      // A takeover comes within a lease time or two; a loaded replica may need longer. What it sends is claimed
      // first, so a long window only risks a late notification, never a second one.
      pendingMs: Math.max(60_000, 5 * env.GATEWAY_LEASE_MS),
      log,
    })
    app.decorate('notifications', { ledger, watcher, outbox, escalations, routes: () => routes })

    const failed = (what: string) => (err: unknown) => log.error({ err }, what)
    const offReader = app.events.streams.onReaderStart((kasmId) => watcher.readerStarted(kasmId))
    const offSessions = app.sessions.onChange((kasmId) => {
      watcher.sync(kasmId).catch(failed('notification watch not updated after a session change'))
    })
    app.addHook('onReady', async () => {
      await watcher.syncAll().catch(failed('sessions not watched for notifications'))
    })

    if (file !== undefined) {
      const reloads = new Counter({
        name: 'krg_notify_file_reloads_total',
        help: 'Reloads of GATEWAY_NOTIFY_FILE on SIGHUP, by outcome (applied, failed)',
        labelNames: ['outcome'],
        registers: [app.metrics.registry],
      })
      let reloading = Promise.resolve()
      const reload = (): void => {
        reloading = reloading.then(async () => {
          try {
            routes = await load()
            metrics.initialise(labels(routes))
            reloads.inc({ outcome: 'applied' })
            log.info({ notifyFile: file, teams: routes.teams.size }, 'notify file applied')
            await watcher.syncAll()
          } catch (err) {
            reloads.inc({ outcome: 'failed' })
            const reason = err instanceof ConfigError ? err.message : String((err as Error).message)
            log.error({ notifyFile: file, reason }, 'notify file reload failed; keeping the previous routes')
          }
        })
      }
      process.on('SIGHUP', reload)
      app.addHook('onClose', async () => {
        process.off('SIGHUP', reload)
        await reloading
      })
    }

    app.addHook('preClose', async () => {
      offReader()
      offSessions()
      watcher.close()
      escalations.close()
      await sending.close()
      await posting?.close()
    })
    app.addHook('onClose', () => dispatcher.destroy())
  },
  {
    name: 'notify',
    dependencies: ['summary', 'events', 'sessions', 'upstream', 'metrics', 'stores', 'chat'],
  },
)
