import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { Agent } from 'undici'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { MemoryEventBus } from '../../src/events/memory-bus.ts'
import { TraceBackfill } from '../../src/events/trace-backfill.ts'
import { type ReaderHealth, UpstreamReader } from '../../src/events/upstream-reader.ts'
import { Secret } from '../../src/sessions/secret.ts'
import type { Session } from '../../src/sessions/types.ts'
import { eventMetrics, until } from './helpers.ts'

const OLD = 'messaging-token-before-rotation'
const NEW = 'messaging-token-after-rotation'

test('a restart that arrives while the reader reads the session is not lost: it connects with the new token', async (t) => {
  const rt = await startSimulatedRuntime({
    messagingToken: OLD,
    observeTokenRequired: true,
    pingIntervalMs: 5000,
  })
  t.after(() => rt.close())
  const agent = new Agent()
  t.after(() => agent.close())
  const { metrics } = eventMetrics()
  const bus = new MemoryEventBus({ capacity: 100, maxBytes: 1 << 20, totalBytes: 1 << 24 })
  t.after(() => bus.close())
  const record = (token: string, version: number): Session => ({
    kasmId: 'k',
    upstream: rt.url,
    team: 'blue',
    messagingToken: new Secret(token),
    source: 'admin',
    version,
  })
  let current = record(OLD, 1)
  // While set, the reader's next look at the registry waits here and answers what it held before.
  let held: { answer: () => void; asked: boolean } | null = null
  const health: ReaderHealth[] = []
  const reader = new UpstreamReader({
    kasmId: 'k',
    session: () => {
      if (held === null) return Promise.resolve(current)
      const before = current
      const gate = held
      gate.asked = true
      return new Promise((resolve) => {
        gate.answer = () => resolve(before)
      })
    },
    bus,
    fence: 1,
    dispatcherFor: () => agent,
    backfill: new TraceBackfill({ dispatcherFor: () => agent }),
    // A refused token is retried after a minute: only a reconnect with the new token can be live in time.
    timing: {
      notUpPollMs: 20,
      backoffMs: [20],
      idleTimeoutMs: 10_000,
      closedPollMs: 100,
      refusedRetryMs: 60_000,
    },
    log: pino({ level: 'silent' }),
    metrics,
    maxEventBytes: 1 << 20,
    onHealth: (h) => health.push(h),
  })
  reader.start()
  t.after(() => reader.stop())
  await until('live with the old token', () => reader.state === 'live')

  const gate = { answer: () => {}, asked: false }
  held = gate
  reader.restart()
  await until('the reader reading the registry', () => gate.asked)
  // The token rotates while that read is in flight: the registry's change restarts the reader again.
  rt.rotateTokens({ messagingToken: NEW })
  current = record(NEW, 2)
  held = null
  reader.restart()
  gate.answer()

  await until('live with the new token', () => reader.state === 'live' && rt.openEventStreams === 1)
  assert.deepEqual(health, ['live'], 'never refused: the stale read was not used to connect')
})
