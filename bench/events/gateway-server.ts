/**
 * Bench child: the gateway, built exactly as server.ts builds it (same app, same plugins), with one session
 * `bench` pointing at the emitter. Viewers authenticate with one HS256 bearer; the per-operator stream cap
 * and the request rate limit are raised so that one operator can open thousands of streams.
 */
import { registerBenchSession, startBenchGateway } from '../common/gateway.ts'
import { serve } from '../common/ipc.ts'
import { probeHandlers } from '../common/probes.ts'

const gateway = await startBenchGateway()
await registerBenchSession(gateway.app, 'bench')

// An exit rather than death by the signal, so a `--cpu-prof` profile (run.ts --profile) is written.
process.once('SIGTERM', () => process.exit(0))

serve({
  info: () => gateway.info(),
  viewers: () => gateway.app.events.streams.stats().viewers,
  ...probeHandlers(),
})
