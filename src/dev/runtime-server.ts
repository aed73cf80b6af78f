import { startSimulatedRuntime } from './runtime/index.ts'

/**
 * Runs the simulated runtime as its own process (the compose demo's "session"), with autoplay so there is
 * something to watch. PORT (default 9434, the runtime's own default), KASM_RUNTIME_INBOX_TOKEN and
 * KASM_RUNTIME_SESSION_TOKEN as the real runtime reads them.
 */
const runtime = await startSimulatedRuntime({
  host: process.env.HOST ?? '0.0.0.0',
  port: Number(process.env.PORT ?? 9434),
  messagingToken: process.env.KASM_RUNTIME_INBOX_TOKEN,
  sessionToken: process.env.KASM_RUNTIME_SESSION_TOKEN,
  kasmId: process.env.KASM_ID ?? 'demo',
  autoplay: true,
})
process.stdout.write(`simulated runtime listening at ${runtime.url}\n`)
const stop = (): void => void runtime.close().then(() => process.exit(0))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
