import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.ts'
import { startDemoColleague } from './demo-colleague.ts'
import type { DemoIdp } from './demo-idp.ts'
import type { PlayName } from './runtime/autoplay.ts'
import { type SimulatedRuntime, startSimulatedRuntime } from './runtime/index.ts'

/** The demo's sessions: simulated runtimes of two teams (the demo people's, see DEMO_PEOPLE in demo-idp.ts). */
export const DEMO_SESSIONS = [
  { kasmId: 'demo', team: 'blue', play: 'expenses', intervalMs: 2000 },
  { kasmId: 'demo-crm', team: 'red', play: 'crm', intervalMs: 2600 },
] as const satisfies readonly { kasmId: string; team: string; play: PlayName; intervalMs: number }[]

/** The embedded demo: simulated runtimes as sessions `demo` and `demo-crm`, the demo's sign-in, a one-time link. */
export interface Demo {
  /** Prints how to sign in once the gateway listens (the one-time link needs the real port). */
  announce(app: FastifyInstance): void
  close(): Promise<void>
}

/** The demo's own identity provider, started before the app so the app is configured as its client. */
export interface DemoSignIn {
  readonly idp: DemoIdp
  /** `config` with GATEWAY_OIDC_* pointing at the demo IdP. */
  readonly config: Config
}

/**
 * With no identity provider configured, the demo signs people in through a real one of its own (oidc-provider
 * in this process, two demo people), so a newcomer sees the flow a team will use. Null when an IdP is
 * configured, when PORT is 0 (the redirect URI must be known before listening), or when oidc-provider (a dev
 * dependency, absent from the image) cannot be loaded: the one-time link still works then.
 */
export async function startDemoSignIn(config: Config): Promise<DemoSignIn | null> {
  const { env } = config
  if (env.GATEWAY_OIDC_ISSUER !== undefined || env.PORT === 0) return null
  let idpModule: typeof import('./demo-idp.ts')
  try {
    idpModule = await import('./demo-idp.ts')
  } catch {
    process.stderr.write(
      'kasm-runtime-gateway demo: no demo sign-in (oidc-provider is a dev dependency: npm ci)\n',
    )
    return null
  }
  const origin = env.GATEWAY_PUBLIC_ORIGIN ?? `http://localhost:${env.PORT}`
  const base = `${origin}${config.basePath}`
  let told = false
  const idp: DemoIdp = await idpModule.startDemoIdp({
    host: env.HOST,
    issuerHost: new URL(origin).hostname,
    // The terminal has scrolled since the start: how to sign in, again, when the first login form shows.
    onLoginForm: () => {
      if (told) return
      told = true
      process.stdout.write(`\nkasm-runtime-gateway demo: sign in as ${peopleLine(idp)}\n\n`)
    },
  })
  const clientId = 'kasm-runtime-gateway-demo'
  const clientSecret = randomBytes(24).toString('base64url')
  idp.setClient(idpModule.gatewayClient(base, clientId, clientSecret))
  return {
    idp,
    config: {
      ...config,
      env: {
        ...env,
        GATEWAY_OIDC_ISSUER: idp.issuer,
        GATEWAY_OIDC_CLIENT_ID: clientId,
        GATEWAY_OIDC_CLIENT_SECRET: clientSecret,
        GATEWAY_OIDC_REDIRECT_URI: `${base}auth/callback`,
      },
    },
  }
}

/** Who the demo IdP signs in, and the password: what a person needs at its login form. */
function peopleLine(idp: DemoIdp): string {
  return `olivia (operator of teams blue and red) or victor (viewer of team blue), password ${idp.password}`
}

/**
 * Starts the demo for `npm start` with no configuration. Never called in production or with a sessions file
 * (see `config.demo`). The runtime's messaging token is random and lives only in this process.
 */
export async function startDemo(app: FastifyInstance, signIn: DemoSignIn | null): Promise<Demo> {
  const runtimes: SimulatedRuntime[] = []
  // Two sessions of two teams, so the overview shows what it is for (a question or a handoff sorts its
  // session first); the second ticks at another pace, so their questions do not come in step.
  for (const { kasmId, team, play, intervalMs } of DEMO_SESSIONS) {
    const messagingToken = randomBytes(24).toString('base64url')
    const runtime = await startSimulatedRuntime({
      messagingToken,
      sessionToken: randomBytes(24).toString('base64url'),
      kasmId,
      autoplay: { intervalMs, play },
      // A handoff pause a newcomer can see end on its own while looking around.
      escalationPauseS: 90,
    })
    runtimes.push(runtime)
    await app.sessions.put({ kasmId, upstream: runtime.url, team, messagingToken, source: 'demo' })
  }
  // Someone answers some questions and finishes some handoffs, so the team report has people and both kinds.
  const stopColleague = startDemoColleague(
    app,
    DEMO_SESSIONS.map((s) => s.kasmId),
  )
  app.addHook('preClose', async () => stopColleague())
  return {
    announce(app) {
      const address = app.server.address()
      const port = address !== null && typeof address === 'object' ? address.port : app.config.env.PORT
      const origin = app.config.env.GATEWAY_PUBLIC_ORIGIN ?? `http://localhost:${port}`
      const base = `${origin}${app.config.basePath}`
      const ticket = app.auth.issueLoginTicket({
        sub: 'demo-operator',
        name: 'Demo operator',
        roles: ['operator'],
        teams: ['*'],
      })
      // stdout, not the logger: the password and the ticket are credentials for the person at this terminal.
      const people = signIn
        ? `Open the console at ${base} and sign in through the demo identity provider (${signIn.idp.issuer}):\n` +
          `  ${peopleLine(signIn.idp)}\n\n` +
          'Or open this one-time link within 10 minutes to sign in as an operator of every team:\n'
        : 'Open this one-time link within 10 minutes to sign in as an operator:\n'
      process.stdout.write(
        `\nkasm-runtime-gateway demo: sessions "demo" (team blue) and "demo-crm" (team red) are simulated runtimes.\n${people}\n  ${base}auth/login?ticket=${ticket}\n\n`,
      )
    },
    async close() {
      stopColleague()
      await Promise.all(runtimes.map((r) => r.close()))
      await signIn?.idp.close()
    },
  }
}
