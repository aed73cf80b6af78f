import { Gauge, type Registry } from 'prom-client'
import type { SessionSource, SessionView } from './types.ts'

/**
 * `krg_sessions_registered{source}`: the sessions this replica knows, counted at scrape time from the registry
 * (in cluster mode its mirror of Redis, so every replica reports the same). Every source is reported, at 0 when
 * there is none; when the registry cannot be read (not loaded yet) the gauge keeps its last values.
 */
export function registerSessionsGauge(registry: Registry, list: () => Promise<SessionView[]>): void {
  new Gauge({
    name: 'krg_sessions_registered',
    help: 'Sessions registered (file, admin API, demo), as this replica sees the registry',
    labelNames: ['source'],
    registers: [registry],
    async collect() {
      let sessions: SessionView[]
      try {
        sessions = await list()
      } catch {
        return
      }
      const counts: Record<SessionSource, number> = { file: 0, admin: 0, demo: 0, launch: 0, kasm: 0 }
      for (const s of sessions) counts[s.source] = (counts[s.source] ?? 0) + 1
      for (const [source, n] of Object.entries(counts)) this.set({ source }, n)
    },
  })
}
