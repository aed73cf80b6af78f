/**
 * Bench child: the gateway, built exactly as server.ts builds it (same app, same plugins), with one session
 * `bench` pointing at the emitter. Viewers authenticate with one HS256 bearer; the per-operator stream cap
 * and the request rate limit are raised so that one operator can open thousands of streams.
 */
import { SignJWT } from 'jose'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { collectAll, serve } from './ipc.ts'
import { profileFor } from './profile.ts'

const secret = 'bench-jwt-secret-that-is-long-enough-0123456789abcdef'
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
})
const app = await buildApp(config)
app.server.requestTimeout = 0
app.server.headersTimeout = 30_000
await app.listen({ port: 0, host: '127.0.0.1' })
await app.sessions.put({
  kasmId: 'bench',
  upstream: process.env.BENCH_UPSTREAM ?? '',
  team: 'bench',
  messagingToken: 'bench-token',
  source: 'admin',
})
const token = await new SignJWT({ roles: ['viewer'], teams: ['bench'] })
  .setProtectedHeader({ alg: 'HS256' })
  .setSubject('bench-operator')
  .setIssuer('https://idp.bench')
  .setAudience('kasm-runtime-gateway')
  .setIssuedAt()
  .setExpirationTime('2h')
  .sign(new TextEncoder().encode(secret))

serve({
  info: () => ({ port: (app.server.address() as { port: number }).port, pid: process.pid, token }),
  viewers: () => app.events.streams.stats().viewers,
  mem: () => {
    collectAll()
    return process.memoryUsage()
  },
  snapshot: async (args) => {
    const { writeHeapSnapshot } = await import('node:v8')
    return writeHeapSnapshot((args as { path: string }).path)
  },
  profile: (args) => {
    const { seconds, path } = args as { seconds: number; path: string }
    return profileFor(seconds, path)
  },
  gc: () => {
    collectAll()
    return null
  },
})
