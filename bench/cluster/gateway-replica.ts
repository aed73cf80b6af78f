/**
 * Bench child: one gateway replica, built as server.ts builds it. With BENCH_REDIS_URL it runs in cluster
 * mode (Redis bus, lease, stores); without, embedded (memory bus). BENCH_SESSIONS sessions `bench-<i>` point
 * at the emitter's runtime; only the replica with BENCH_REGISTER=1 registers them (the others learn them
 * from Redis, which is part of what is measured). Limits are raised so one operator can open thousands of
 * streams.
 */
import { registerBenchSession, startBenchGateway } from '../common/gateway.ts'
import { serve } from '../common/ipc.ts'

const redisUrl = process.env.BENCH_REDIS_URL
const sessions = Number(process.env.BENCH_SESSIONS ?? 1)
const { app, info } = await startBenchGateway(
  redisUrl
    ? {
        REDIS_URL: redisUrl,
        GATEWAY_ENCRYPTION_KEY: 'QmVuY2gta2V5LTMyLWJ5dGVzLWxvbmctZW5vdWdoISE',
        GATEWAY_REDIS_PREFIX: process.env.BENCH_PREFIX ?? 'krgbench:',
      }
    : {},
)
if (process.env.BENCH_REGISTER === '1') {
  for (let i = 0; i < sessions; i++) await registerBenchSession(app, `bench-${i}`)
}

serve({
  info,
  /** Sessions this replica knows (a registering replica's writes reach the others through Redis). */
  known: async () => (await app.sessions.list()).length,
  viewers: () => app.events.streams.stats().viewers,
  readers: () => app.events.streams.stats().readers,
})
