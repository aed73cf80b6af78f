import fp from 'fastify-plugin'
import { createReportMetrics, type ReportMetrics } from './metrics.ts'
import { ReportRecorder } from './recorder.ts'
import type { ReportStore } from './types.ts'

/** The team report as its routes see it. */
export interface TeamReport {
  readonly store: ReportStore
  readonly recorder: ReportRecorder
  readonly metrics: ReportMetrics
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The team report (src/report): its records, what writes them, its metrics. */
    teamReport: TeamReport
  }
}

/**
 * The team report: every question and handoff of the sessions this replica summarises (the overview's,
 * attention routing's, and with GATEWAY_STREAM_EAGER every session's) becomes a record in the report store and
 * a count in the metrics, once across replicas (see recorder.ts). Every team's series are exported at 0 from
 * the first scrape.
 */
export const reportPlugin = fp(
  async (app) => {
    const env = app.config.env
    const log = app.log.child({ component: 'report' })
    const metrics = createReportMetrics(app.metrics.registry)
    const recorder = new ReportRecorder({
      store: app.stores.report,
      audit: app.audit,
      sessions: app.sessions,
      reading: (kasmId) => app.events.streams.reader(kasmId) !== null,
      metrics,
      board: app.board,
      // A takeover comes within a lease time or two: a reader that folds the session has written long before.
      graceMs: 3 * env.GATEWAY_LEASE_MS,
      log,
      quiet: app.stores.down,
    })
    app.decorate('teamReport', { store: app.stores.report, recorder, metrics })
    const offTap = app.summaries.onTransition((kasmId, t, replay) => recorder.transition(kasmId, t, replay))
    const offReader = app.events.streams.onReaderStart((kasmId) => recorder.readerStarted(kasmId))

    // With GATEWAY_STREAM_EAGER every session is read anyway: it is summarised too, so the report misses none.
    const watched = new Map<string, () => void>()
    const follow = async (kasmId: string): Promise<void> => {
      const session = await app.sessions.get(kasmId)
      if (session === undefined) {
        watched.get(kasmId)?.()
        watched.delete(kasmId)
        return
      }
      metrics.initialise(session.team)
      if (env.GATEWAY_STREAM_EAGER && !watched.has(kasmId))
        watched.set(kasmId, app.summaries.watch(kasmId, { summary: () => {} }))
    }
    const failed = (err: unknown) => log.error({ err }, 'report: sessions not followed')
    const offSessions = app.sessions.onChange((kasmId) => void follow(kasmId).catch(failed))
    // A registry that cannot be read yet (Redis away at boot) must not stop the boot: its sessions are followed
    // by their change events once it loads, as the eager readers are.
    app.addHook('onReady', async () => {
      await app.sessions
        .list()
        .then((views) => Promise.all(views.map((v) => follow(v.kasmId))))
        .catch(failed)
    })
    app.addHook('preClose', async () => {
      offTap()
      offReader()
      offSessions()
      for (const unwatch of watched.values()) unwatch()
      watched.clear()
      await recorder.close()
    })
  },
  { name: 'report', dependencies: ['summary', 'events', 'sessions', 'audit', 'metrics', 'stores'] },
)
