/**
 * Bench child: one gateway replica, built as server.ts builds it. With BENCH_REDIS_URL it runs in cluster
 * mode (Redis bus, lease, stores); without, embedded (memory bus). BENCH_SESSIONS sessions `bench-<i>` point
 * at the emitter's runtime; only the replica with BENCH_REGISTER=1 registers them (the others learn them
 * from Redis, which is part of what is measured). Limits are raised so one operator can open thousands of
 * streams.
 */
import { SignJWT } from 'jose'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { serve } from '../events/ipc.ts'

const secret = 'bench-jwt-secret-that-is-long-enough-0123456789abcdef'
const redisUrl = process.env.BENCH_REDIS_URL
const sessions = Number(process.env.BENCH_SESSIONS ?? 1)
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
  ...(redisUrl
    ? {
        REDIS_URL: redisUrl,
        GATEWAY_ENCRYPTION_KEY: 'QmVuY2gta2V5LTMyLWJ5dGVzLWxvbmctZW5vdWdoISE',
        GATEWAY_REDIS_PREFIX: process.env.BENCH_PREFIX ?? 'krgbench:',
      }
    : {}),
})
const app = await buildApp(config)
app.server.requestTimeout = 0
app.server.headersTimeout = 30_000
await app.listen({ port: 0, host: '127.0.0.1' })
const ids = Array.from({ length: sessions }, (_, i) => `bench-${i}`)
if (process.env.BENCH_REGISTER === '1') {
  for (const kasmId of ids) {
    await app.sessions.put({
      kasmId,
      upstream: process.env.BENCH_UPSTREAM ?? '',
      team: 'bench',
      messagingToken: 'bench-token',
      source: 'admin',
    })
  }
}
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
  /** Sessions this replica knows (a registering replica's writes reach the others through Redis). */
  known: async () => (await app.sessions.list()).length,
  viewers: () => app.events.streams.stats().viewers,
  readers: () => app.events.streams.stats().readers,
})
