import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import pino from 'pino'
import { Counter, Registry } from 'prom-client'
import { Agent } from 'undici'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { Beat, beatFor } from '../../src/events/beat.ts'
import { createEventMetrics } from '../../src/events/metrics.ts'
import { SessionWatch } from '../../src/events/session-watch.ts'
import { TraceBackfill } from '../../src/events/trace-backfill.ts'
import { UpstreamReader } from '../../src/events/upstream-reader.ts'
import { Secret } from '../../src/sessions/secret.ts'
import type { Session } from '../../src/sessions/types.ts'
import {
  deletePrefix,
  REDIS_TEST_URL,
  type ReplicaParts,
  replicaParts,
  uniquePrefix,
  until,
} from '../cluster/redis-harness.ts'

// The state machine of one session's reading, on a real Redis bus and lease and a real simulated runtime:
// every watcher here is a retainer (a watcher without a socket), so what is observed is the lease and the
// reader alone.

const TOKEN = 'messaging-token-for-watch-tests'
const KASM_ID = 'w1'

interface Side {
  readonly parts: ReplicaParts
  readonly watch: SessionWatch
  /** kasmIds whose reader this side started, in order. */
  readonly started: string[]
  /** How often the watch told its owner to forget it. */
  retired: number
  /** Removes the session from what this side's registry answers. */
  remove(): void
}

async function runtime(t: TestContext): Promise<SimulatedRuntime> {
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 5000 })
  t.after(() => rt.close())
  return rt
}

/** One replica's watch of session w1, with its own Redis connections, bus and lease under `prefix`. */
async function side(
  t: TestContext,
  prefix: string,
  rt: SimulatedRuntime,
  opts: { leaseMs: number; lingerMs?: number },
): Promise<Side> {
  const parts = await replicaParts(REDIS_TEST_URL, prefix, { leaseMs: opts.leaseMs })
  const agent = new Agent()
  const registry = new Registry()
  const metrics = createEventMetrics(
    registry,
    new Counter({ name: 'errors', help: 'h', labelNames: ['reason'], registers: [registry] }),
    new Counter({ name: 'echoes', help: 'h', labelNames: ['where'], registers: [registry] }),
  )
  const log = pino({ level: 'silent' })
  let session: Session | undefined = {
    kasmId: KASM_ID,
    upstream: rt.url,
    team: 'blue',
    messagingToken: new Secret(TOKEN),
    source: 'admin',
    version: 1,
  }
  const result: Side = {
    parts,
    started: [],
    retired: 0,
    remove: () => {
      session = undefined
    },
    watch: new SessionWatch(
      KASM_ID,
      {
        lease: parts.lease,
        session: async () => session,
        leaseMs: opts.leaseMs,
        beat: new Beat(beatFor(opts.leaseMs)),
        lingerMs: opts.lingerMs ?? 0,
        log,
        storeLevel: (level = 'warn') => level,
        newReader: (kasmId, fence, onStop) =>
          new UpstreamReader({
            kasmId,
            session: async () => session,
            bus: parts.bus,
            fence,
            dispatcherFor: () => agent,
            backfill: new TraceBackfill({ dispatcherFor: () => agent }),
            timing: {
              notUpPollMs: 30,
              backoffMs: [20, 40],
              idleTimeoutMs: 10_000,
              closedPollMs: 50,
              refusedRetryMs: 100,
            },
            log,
            metrics,
            maxEventBytes: 1 << 20,
            onStop,
          }),
        readerStarted: (kasmId) => result.started.push(kasmId),
        retired: () => {
          result.retired++
        },
        closing: () => false,
      },
      false,
    ),
  }
  t.after(async () => {
    await result.watch.stop()
    await parts.close()
    await agent.close()
  })
  return result
}

function prefixFor(t: TestContext): string {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  return prefix
}

test('a watcher that comes back while the reader lingers gets the same reader and upstream stream', async (t) => {
  const rt = await runtime(t)
  // A lease far longer than the test: only a release, never an expiry, can free it.
  const a = await side(t, prefixFor(t), rt, { leaseMs: 60_000, lingerMs: 60_000 })
  const release = a.watch.retain()
  await until('reading', () => a.watch.state === 'reading' && rt.openEventStreams === 1)
  const reader = a.watch.reader
  release()
  assert.equal(a.watch.state, 'lingering')
  assert.equal(a.watch.timers, 2, 'the renewal and the linger')
  const again = a.watch.retain()
  assert.equal(a.watch.state, 'reading')
  assert.equal(a.watch.reader, reader)
  assert.equal(a.watch.timers, 1, 'the linger is disarmed')
  const { seq } = rt.emit('info', { n: 1 })
  await until('the event stored', async () => (await a.parts.bus.head(KASM_ID))?.seq === seq)
  assert.equal(rt.eventConnections, 1, 'no second upstream connection')
  assert.deepEqual(a.started, [KASM_ID])
  assert.equal(a.retired, 0)
  again()
})

test('the linger passing retires the watch and gives the lease back at once', async (t) => {
  const rt = await runtime(t)
  const prefix = prefixFor(t)
  // A lease of ten minutes, far past any wait here: only a release can let B take it.
  const a = await side(t, prefix, rt, { leaseMs: 600_000, lingerMs: 50 })
  const b = await side(t, prefix, rt, { leaseMs: 600_000 })
  const release = a.watch.retain()
  await until('reading', () => a.watch.state === 'reading')
  release()
  assert.equal(a.watch.state, 'lingering')
  await until('the linger over', () => a.watch.state === 'idle')
  assert.equal(a.retired, 1)
  assert.equal(a.watch.timers, 0)
  await until('the upstream stream closed', () => rt.openEventStreams === 0)
  // The release follows the reader's stop, a Redis round trip after the runtime saw its stream close (a loaded
  // run has shown B asking first).
  await until(
    'the lease released, not left to expire',
    async () => (await b.parts.lease.acquire(KASM_ID)) !== null,
  )
})

test('a watcher leaving while the lease is being acquired gives the fence back and starts no reader', async (t) => {
  const rt = await runtime(t)
  const prefix = prefixFor(t)
  // A lease of ten minutes, far past any wait here: only the fence given back can let B take it.
  const a = await side(t, prefix, rt, { leaseMs: 600_000 })
  const b = await side(t, prefix, rt, { leaseMs: 600_000 })
  const release = a.watch.retain()
  assert.equal(a.watch.state, 'acquiring')
  release()
  assert.equal(a.watch.state, 'idle')
  assert.equal(a.retired, 1)
  // A's acquire may still be in flight: the lease comes free once it finished and handed its fence back.
  await until(
    'the lease free for another replica',
    async () => (await b.parts.lease.acquire(KASM_ID)) !== null,
  )
  assert.equal(a.watch.state, 'idle')
  assert.deepEqual(a.started, [])
  assert.equal(rt.eventConnections, 0)
})

test('a replica whose lease was taken over stands by, then reads again when it comes free', async (t) => {
  const rt = await runtime(t)
  const prefix = prefixFor(t)
  // Renewed every 300 ms, retried every 450 ms.
  const a = await side(t, prefix, rt, { leaseMs: 900 })
  const b = await side(t, prefix, rt, { leaseMs: 60_000 })
  a.watch.retain()
  await until('A reading', () => a.watch.state === 'reading' && rt.openEventStreams === 1)
  const before = rt.emit('info', { n: 1 })
  await until('the event stored', async () => (await a.parts.bus.head(KASM_ID))?.seq === before.seq)
  // As if A had paused past its lease: it expired and B took it.
  await a.parts.command.del(a.parts.keys.lease(KASM_ID))
  const fence = await b.parts.lease.acquire(KASM_ID)
  assert.notEqual(fence, null)
  await until('A standing by', () => a.watch.state === 'standby')
  assert.equal(a.watch.reader, null)
  await until('A let its upstream stream go', () => rt.openEventStreams === 0)
  const during = rt.emit('info', { n: 2 })
  await b.parts.lease.release(KASM_ID, fence ?? 0)
  await until('A reading again', () => a.watch.state === 'reading' && rt.openEventStreams === 1)
  // The new reader resumed from the stored head: the event of the standby came, nothing twice.
  await until('the standby event stored', async () => (await a.parts.bus.head(KASM_ID))?.seq === during.seq)
  assert.deepEqual(a.started, [KASM_ID, KASM_ID])
  assert.equal(rt.eventConnections, 2)
})

test('a session found gone while its reader lingers retires the watch before the linger ends', async (t) => {
  const rt = await runtime(t)
  const a = await side(t, prefixFor(t), rt, { leaseMs: 60_000, lingerMs: 60_000 })
  const release = a.watch.retain()
  await until('reading', () => a.watch.state === 'reading' && rt.openEventStreams === 1)
  release()
  assert.equal(a.watch.state, 'lingering')
  // The reader learns it when it reconnects: its registry no longer has the session.
  a.remove()
  rt.dropStreams()
  await until('retired', () => a.retired === 1)
  assert.equal(a.watch.state, 'idle')
  assert.equal(a.watch.timers, 0, 'the linger timer is disarmed')
  assert.equal(a.watch.reader, null)
})
