/**
 * Bench child: the simulated runtime emitting `log` events at a set rate. Each event's payload ends with `t`,
 * its emission time in ms (performance.timeOrigin + performance.now(), comparable across processes on one
 * machine), from which a viewer measures the delay. Every session of the bench points at this one runtime.
 */
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { serve } from '../events/ipc.ts'

const rt = await startSimulatedRuntime({ messagingToken: 'bench-token', pingIntervalMs: 15_000 })
// About the size of a typical sidebar event (a step row or a log line).
const pad = 'x'.repeat(180)
let timer: NodeJS.Timeout | null = null
let emitted = 0

serve({
  info: () => ({ url: rt.url, pid: process.pid }),
  /** Emits `perSecond` events, `burst` per timer tick; 0 stops. */
  rate: (args) => {
    const { perSecond, burst } = args as { perSecond: number; burst: number }
    if (timer !== null) clearInterval(timer)
    timer = null
    if (perSecond > 0) {
      timer = setInterval(
        () => {
          for (let i = 0; i < burst; i++) {
            rt.emit('log', { level: 'info', msg: pad, t: performance.timeOrigin + performance.now() })
            emitted++
          }
        },
        (1000 * burst) / perSecond,
      )
    }
    return null
  },
  stats: () => ({ emitted, openEventStreams: rt.openEventStreams, eventConnections: rt.eventConnections }),
})
