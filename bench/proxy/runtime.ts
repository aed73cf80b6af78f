/**
 * Bench child: the simulated runtime (no autoplay) on BENCH_PORT, the upstream of one contestant of the proxy
 * bench. `reset` restarts it on the same port, which drops what the closed loops stored (1 MiB uploads are
 * kept for the life of a simulated runtime) and starts a fresh run.
 */
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { serve } from '../common/ipc.ts'

const port = Number(process.env.BENCH_PORT ?? 0)
const start = (): Promise<SimulatedRuntime> =>
  // Attachments of 1 MiB and more must be accepted; the default cap is 8 MiB.
  startSimulatedRuntime({ port, messagingToken: 'bench-token', pingIntervalMs: 15_000 })
let rt = await start()

serve({
  info: () => ({ url: rt.url, pid: process.pid, run: rt.run }),
  /** Restarts the runtime on its port: a fresh run and no stored messages or uploads. Answers the run id. */
  reset: async () => {
    await rt.close()
    rt = await start()
    // The GiB of uploads a closed loop stored is given back now, not whenever V8 next collects: the next
    // contestants must not run beside it.
    ;(globalThis as { gc?: () => void }).gc?.()
    return rt.run
  },
})
