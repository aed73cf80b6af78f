/**
 * Bench child: the cluster bench's runtimes. BENCH_RUNTIMES simulated runtimes (src/dev/runtime) in this one
 * process, each serving the sessions the orchestrator points at it: a simulated runtime pushes every event to
 * each of its open event streams, so one runtime with k sessions (k upstream readers) feeds k sessions at
 * once. `rate` makes each runtime emit `perSecond` events a second, runtime j a (j / runtimes) share of the
 * interval after runtime 0: the sessions' events arrive spread over the second, in groups of k, as events of
 * independent sessions arriving at that total rate would fall into intervals of 1 / (runtimes x perSecond).
 * Events carry `t` (bench/common/emitter.ts explains it) and are about the size of a sidebar log line.
 */
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { serve } from '../common/ipc.ts'

const count = Number(process.env.BENCH_RUNTIMES ?? 1)
/** This process's first runtime's place among all (bench/cluster/runtime-pool.ts), and how many there are. */
const first = Number(process.env.BENCH_RUNTIME_FIRST ?? 0)
const total = Number(process.env.BENCH_RUNTIME_TOTAL ?? count)
const runtimes: SimulatedRuntime[] = []
for (let i = 0; i < count; i++) {
  runtimes.push(await startSimulatedRuntime({ messagingToken: 'bench-token', pingIntervalMs: 15_000 }))
}
const pad = 'x'.repeat(180)
const emitted = new Array<number>(count).fill(0)
let timers: NodeJS.Timeout[] = []

function stop(): void {
  for (const t of timers) clearTimeout(t)
  timers = []
}

serve({
  info: () => ({ urls: runtimes.map((r) => r.url), pid: process.pid }),
  /** Every runtime emits `perSecond` events a second, staggered; 0 stops. */
  rate: (args) => {
    const { perSecond } = args as { perSecond: number }
    stop()
    if (perSecond <= 0) return null
    const interval = 1000 / perSecond
    runtimes.forEach((rt, j) => {
      const emit = () => {
        rt.emit('log', { level: 'info', msg: pad, t: performance.timeOrigin + performance.now() })
        emitted[j] = (emitted[j] ?? 0) + 1
      }
      const start = setTimeout(
        () => timers.push(setInterval(emit, interval)),
        (interval * (first + j)) / total,
      )
      timers.push(start)
    })
    return null
  },
  /** Events emitted so far by each runtime, and each runtime's open event streams (upstream readers). */
  stats: () => ({ emitted: [...emitted], streams: runtimes.map((r) => r.openEventStreams) }),
})
