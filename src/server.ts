import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.ts'
import { ConfigError, loadConfig } from './config.ts'
import { type DemoSignIn, startDemo, startDemoSignIn } from './dev/demo.ts'
import { type DemoNotify, startDemoNotify } from './dev/demo-notify.ts'
import { readableLog } from './dev/readable-log.ts'
import { loggerOptions } from './logger.ts'
import type { TracingSdk } from './tracing/sdk.ts'

/**
 * What close-with-grace would also take for a shutdown, and the gateway does not: SIGHUP reloads the sessions and
 * notify files, and an uncaught error crashes at once rather than drain on a state nobody knows.
 */
const NOT_A_SHUTDOWN: closeWithGrace.AllEvents[] = [
  'SIGHUP',
  'SIGQUIT',
  'SIGILL',
  'SIGTRAP',
  'SIGABRT',
  'SIGBUS',
  'SIGFPE',
  'SIGSEGV',
  'SIGUSR2',
  'uncaughtException',
  'unhandledRejection',
  'beforeExit',
]

/** Listen failures an operator fixes with PORT or HOST, said in one line instead of a stack. */
const LISTEN_REFUSALS: Record<string, string> = {
  EADDRINUSE: 'the address is in use',
  EACCES: 'not permitted (a port this low needs privileges)',
  EADDRNOTAVAIL: 'no such address on this host',
}

/** The line for a listen failure of {@link LISTEN_REFUSALS} (the gateway's or the demo IdP's), else undefined. */
function listenRefusal(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  const { code, address, port } = err as NodeJS.ErrnoException & { address?: string; port?: number }
  const why = code === undefined ? undefined : LISTEN_REFUSALS[code]
  if (why === undefined) return undefined
  // A listen on port 0 (the demo IdP's) names no port.
  return `cannot listen on ${port ? `${address}:${port}` : address}: ${why}; set PORT or HOST`
}

/**
 * Ends a boot the operator must fix (a refused variable, an address that cannot be listened on) with one
 * stderr line and exit 78, EX_CONFIG; anything else is thrown on, with its stack.
 */
function refuseBoot(err: unknown): never {
  const message = err instanceof ConfigError ? err.message : listenRefusal(err)
  if (message === undefined) throw err
  process.stderr.write(`kasm-runtime-gateway: ${message}\n`)
  process.exit(78)
}

/**
 * The only file that starts anything: reads config once, builds the app, listens, and drains on SIGTERM.
 * Run node on it directly (not through npm) in production so signals arrive.
 */
async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>
  let app: FastifyInstance
  let demoSignIn: DemoSignIn | null = null
  let demoNotify: DemoNotify | null = null
  let tracing: TracingSdk | null = null
  try {
    config = loadConfig()
    // Before the app is built (its plugins ask whether spans are on); loaded only when tracing is configured.
    if (config.tracing) tracing = await (await import('./tracing/sdk.ts')).startTracing(config.tracing)
    // The demo's identity provider first: the app is built as its client.
    if (config.demo) demoSignIn = await startDemoSignIn(config)
    // And its webhook receiver: the demo's notify file (two steps) points at it.
    if (config.demo) demoNotify = await startDemoNotify(demoSignIn?.config ?? config)
    // Plugins validate what they load at boot too (the sessions file): the same clean exit for both.
    // The demo's terminal is where a person reads how to sign in: readable lines, request lines at debug.
    app = await buildApp(
      demoNotify?.config ?? demoSignIn?.config ?? config,
      config.demo ? { requestLog: 'debug', logger: loggerOptions(config, readableLog(process.stdout)) } : {},
    )
  } catch (err) {
    refuseBoot(err)
  }
  // Long-lived SSE responses must not be cut by Node's request timeout; headers still must arrive promptly.
  tracing?.logTo(app.log)
  demoNotify?.logTo(app.log)
  app.server.requestTimeout = 0
  app.server.headersTimeout = 30_000
  app.server.keepAliveTimeout = 65_000

  const demo = config.demo ? await startDemo(app, demoSignIn) : undefined
  // The signal handlers go in before the listen starts, not after it: "Server listening" is the line an
  // orchestrator (or a test) may answer with a SIGTERM at once, and one arriving between that line and the
  // handlers would take Node's default and kill the process without a drain.
  const listening = app.listen({ port: config.env.PORT, host: config.env.HOST })
  const grace = config.env.GATEWAY_SHUTDOWN_GRACE_MS
  closeWithGrace(
    {
      delay: grace,
      skip: NOT_A_SHUTDOWN,
      logger: { error: (err: unknown) => app.log.error({ err }, 'error during shutdown') },
      onTimeout: () => app.log.error('shutdown grace period exceeded; exiting'),
      onSecondSignal: (signal) => app.log.error({ signal }, 'second signal during the drain; exiting'),
    },
    async ({ signal }) => {
      // A signal during the listen drains once it is done: closing a server mid-listen leaves it bound.
      await listening.catch(() => undefined)
      app.log.info({ signal }, 'shutting down: draining streams')
      const startedAt = Date.now()
      // Stop taking viewers (and fail /readyz), release the reader leases, then end the streams spread over
      // a few seconds so their reconnects do not hit the other replicas in one burst.
      app.readiness.drain()
      await app.events.streams.close(grace / 2, Math.min(5000, grace / 4))
      await app.close()
      await demo?.close()
      await demoNotify?.close()
      // The last spans (the drain's requests) are exported before the exit.
      await tracing?.shutdown()
      // The last line: an orchestrator's log shows the drain finished (and how long it took) before the exit.
      app.log.info({ signal, durationMs: Date.now() - startedAt }, 'shutdown complete')
    },
  )
  await listening.catch(refuseBoot)
  if (demo) demo.announce(app)
}

await main()
