/**
 * The gateway as a bench child builds it: the real app (same plugins as server.ts) with the limits raised so
 * that one operator can open thousands of streams, and one HS256 bearer every viewer authenticates with.
 */
import type { FastifyInstance } from 'fastify'
import { SignJWT } from 'jose'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'

const secret = 'bench-jwt-secret-that-is-long-enough-0123456789abcdef'

/** A started gateway on 127.0.0.1 (free port) and the bearer token of its one viewer operator. */
export interface BenchGateway {
  app: FastifyInstance
  token: string
  /** What the child answers to `info`. */
  info(): { port: number; pid: number; token: string }
}

/** Builds and starts the gateway; `env` adds to (or overrides) the bench's environment. */
export async function startBenchGateway(env: Record<string, string> = {}): Promise<BenchGateway> {
  const config = loadConfig({
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    GATEWAY_DEMO: 'off',
    GATEWAY_JWT_SECRET: secret,
    GATEWAY_JWT_ISSUER: 'https://idp.bench',
    GATEWAY_JWT_AUDIENCE: 'kasm-runtime-gateway',
    GATEWAY_COOKIE_SECRET: 'bench-cookie-secret-0123456789abcdefghij',
    GATEWAY_PUBLIC_ORIGIN: 'http://127.0.0.1',
    GATEWAY_MAX_STREAMS_PER_OPERATOR: '100000',
    GATEWAY_RATE_LIMIT_MAX: '100000000',
    // The bench runtimes listen on loopback: every address allowed for admin-registered upstreams.
    GATEWAY_UPSTREAM_ALLOW: '0.0.0.0/0,::/0',
    ...env,
  })
  const app = await buildApp(config)
  // Streams live for the whole bench; connecting thousands at once may take a while.
  app.server.requestTimeout = 0
  app.server.headersTimeout = 30_000
  await app.listen({ port: 0, host: '127.0.0.1' })
  const token = await new SignJWT({ roles: ['viewer'], teams: ['bench'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench-operator')
    .setIssuer('https://idp.bench')
    .setAudience('kasm-runtime-gateway')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(new TextEncoder().encode(secret))
  return {
    app,
    token,
    info: () => ({ port: (app.server.address() as { port: number }).port, pid: process.pid, token }),
  }
}

/** Registers session `kasmId` (team `bench`) pointing at the emitter's runtime (BENCH_UPSTREAM). */
export async function registerBenchSession(app: FastifyInstance, kasmId: string): Promise<void> {
  await app.sessions.put({
    kasmId,
    upstream: process.env.BENCH_UPSTREAM ?? '',
    team: 'bench',
    messagingToken: 'bench-token',
    source: 'admin',
  })
}
