/**
 * Bench child: the simulated runtime, emitting `log` events at a set rate. Each event carries `t`, the
 * wall-clock time of its emission in milliseconds with microsecond precision (performance.timeOrigin +
 * performance.now(), comparable across processes on one machine), as its last field, so a viewer measures
 * the delay from the runtime's write to its own read. In nchan mode every event is also POSTed to nchan's
 * publisher location (the fan-out a user would otherwise pick). Both benches use it: the events bench starts
 * one per contestant, the cluster bench one that feeds every session.
 */
import { Pool } from 'undici'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { serve } from './ipc.ts'

const rt = await startSimulatedRuntime({ messagingToken: 'bench-token', pingIntervalMs: 15_000 })
// Pads a frame to about the size of a typical sidebar event (a step row or a log line).
const pad = 'x'.repeat(180)
let timer: NodeJS.Timeout | null = null
let emitted = 0
let publisher: { pool: Pool; path: string } | null = null
let publishErrors = 0

function emitBurst(count: number): void {
  const lines: string[] = []
  for (let i = 0; i < count; i++) {
    const t = performance.timeOrigin + performance.now()
    lines.push(rt.emit('log', { level: 'info', msg: pad, t }).line)
    emitted++
  }
  if (publisher !== null) {
    const { pool, path } = publisher
    for (const body of lines) {
      pool
        .request({ method: 'POST', path, body, headers: { 'content-type': 'text/plain' } })
        .then((res) => res.body.dump())
        .catch(() => publishErrors++)
    }
  }
}

serve({
  info: () => ({ url: rt.url, pid: process.pid }),
  /** Emits `perSecond` events, `burst` at a time (one timer tick per burst); 0 stops. */
  rate: (args) => {
    const { perSecond, burst } = args as { perSecond: number; burst: number }
    if (timer !== null) clearInterval(timer)
    timer = null
    if (perSecond > 0) {
      timer = setInterval(() => emitBurst(burst), (1000 * burst) / perSecond)
    }
    return null
  },
  /** Publishes every event to nchan at `url` (null: stop). */
  publishTo: async (args) => {
    const { url } = args as { url: string | null }
    if (publisher !== null) await publisher.pool.close()
    publisher = null
    if (url !== null) {
      const u = new URL(url)
      publisher = { pool: new Pool(u.origin, { connections: 4 }), path: `${u.pathname}${u.search}` }
    }
    return null
  },
  newRun: () => rt.newRun(),
  stats: () => ({
    emitted,
    publishErrors,
    openEventStreams: rt.openEventStreams,
    eventConnections: rt.eventConnections,
  }),
})
