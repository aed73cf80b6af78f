import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { type SimulatedRuntime, startSimulatedRuntime } from './runtime/index.ts'

/** The embedded demo: a simulated runtime registered as session `demo`, and a one-time login link. */
export interface Demo {
  /** Prints the login link once the gateway listens (the link needs the real port). */
  announce(app: FastifyInstance): void
  close(): Promise<void>
}

/**
 * Starts the demo for `npm start` with no configuration. Never called in production or with a sessions file
 * (see `config.demo`). The runtime's messaging token is random and lives only in this process.
 */
export async function startDemo(app: FastifyInstance): Promise<Demo> {
  const messagingToken = randomBytes(24).toString('base64url')
  const runtime: SimulatedRuntime = await startSimulatedRuntime({
    messagingToken,
    sessionToken: randomBytes(24).toString('base64url'),
    kasmId: 'demo',
    autoplay: true,
    // A handoff pause a newcomer can see end on its own while looking around.
    escalationPauseS: 90,
  })
  await app.sessions.put({
    kasmId: 'demo',
    upstream: runtime.url,
    team: 'demo',
    messagingToken,
    source: 'demo',
  })
  return {
    announce(app) {
      const address = app.server.address()
      const port = address !== null && typeof address === 'object' ? address.port : app.config.env.PORT
      const origin = app.config.env.GATEWAY_PUBLIC_ORIGIN ?? `http://localhost:${port}`
      const ticket = app.auth.issueLoginTicket({
        sub: 'demo-operator',
        name: 'Demo operator',
        roles: ['operator'],
        teams: ['*'],
      })
      // stdout, not the logger: the ticket is a one-time credential meant for the person at this terminal.
      process.stdout.write(
        `\nkasm-runtime-gateway demo: session "demo" is a simulated runtime.\n` +
          `Open this one-time link within 10 minutes to sign in as an operator:\n\n  ${origin}${app.config.basePath}auth/login?ticket=${ticket}\n\n`,
      )
    },
    close: () => runtime.close(),
  }
}
