import assert from 'node:assert/strict'
import http from 'node:http'
import { createServer, type Socket } from 'node:net'
import { type TestContext, test } from 'node:test'
import pino from 'pino'
import { Agent } from 'undici'
import type { Delivery } from '../../src/events/bus.ts'
import { MemoryEventBus } from '../../src/events/memory-bus.ts'
import { TraceBackfill } from '../../src/events/trace-backfill.ts'
import { UpstreamReader } from '../../src/events/upstream-reader.ts'
import { Secret } from '../../src/sessions/secret.ts'
import type { Session } from '../../src/sessions/types.ts'
import { TEST_ENCRYPTION_KEY } from '../cluster/cluster-harness.ts'
import { startRedisServer } from '../cluster/redis-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { captureLogs } from '../sessions/capture-logs.ts'
import {
  addRuntimeSession,
  eventMetrics,
  eventsAtLeast,
  fastEventEnv,
  idRange,
  openSse,
  TOKEN,
  until,
} from './helpers.ts'

/**
 * What goes wrong while a reader consumes a runtime's stream is reported as what it is: the runtime's stream
 * breaking is an upstream drop, the bus failing to store is the bus's failure (waited out on the bus's
 * schedule), and a bug of the gateway is logged at error with its error.
 */

async function reconnects(
  url: string,
): Promise<Record<'dropped' | 'bus_failed' | 'internal_error' | 'stream_dropped', number>> {
  const families = parseExposition(await (await fetch(`${url}/metrics`)).text())
  const reconnected = (reason: string) =>
    sampleValue(families, 'krg_event_upstream_reconnects_total', { reason }) ?? 0
  return {
    dropped: reconnected('dropped'),
    bus_failed: reconnected('bus_failed'),
    internal_error: reconnected('internal_error'),
    stream_dropped: sampleValue(families, 'krg_upstream_errors_total', { reason: 'stream_dropped' }) ?? 0,
  }
}

/** One `/events` connection of {@link rawRuntime}: the reader's `after`, and ways to write the body. */
interface RawStream {
  readonly after: number
  /** Writes `text` as one chunk of the chunked body. */
  send(text: string): void
  /** Writes a chunk header no HTTP parser accepts: the body breaks where it stands. */
  breakFraming(): void
}

/**
 * A runtime on a raw TCP socket (so it can send what node:http never would): answers every `/events` with 200
 * and a chunked body that `serve` writes.
 */
async function rawRuntime(t: TestContext, serve: (stream: RawStream) => void): Promise<string> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    socket.on('data', (data) => {
      if (head.includes('\r\n\r\n')) return
      head += data.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' HTTP/'))
      const after = Number(new URL(path, 'http://x').searchParams.get('after') ?? 0)
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n')
      serve({
        after,
        send: (text) => socket.write(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`),
        breakFraming: () => socket.write('zz\r\n'),
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const address = server.address()
  assert.ok(address !== null && typeof address === 'object')
  return `http://127.0.0.1:${address.port}/`
}

const eventText = (run: string, seq: number): string =>
  `id: ${run}:${seq}\nevent: log\ndata: {"seq":${seq},"type":"log","ts":"t","log":{"msg":"m${seq}"}}\n\n`

test('a runtime whose stream breaks mid-body is an upstream drop: counted and logged as one, never as our error', async (t) => {
  const logs = captureLogs('info')
  const gw = await startGateway(fastEventEnv, { logger: logs.logger })
  t.after(() => gw.close())
  // Every connection sends the next event, then a chunk header that breaks the HTTP framing.
  const upstream = await rawRuntime(t, (stream) => {
    stream.send(eventText('r1', stream.after + 1))
    stream.breakFraming()
  })
  await gw.app.sessions.put({ kasmId: 'm1', upstream, team: 'blue', messagingToken: TOKEN, source: 'admin' })
  const viewer = await openSse(`${gw.url}/desktop/m1/mcp/events`, {
    authorization: `Bearer ${await bearer()}`,
  })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 3)
  assert.deepEqual(viewer.ids().slice(0, 3), idRange('r1', 1, 3), 'each reconnect resumes after the last')
  const counted = await reconnects(gw.url)
  assert.ok(counted.dropped >= 2 && counted.stream_dropped >= 2, JSON.stringify(counted))
  assert.equal(counted.internal_error, 0)
  assert.equal(counted.bus_failed, 0)
  const records = logs.records()
  assert.ok(records.some((r) => r.msg === 'upstream event stream dropped; reconnecting'))
  assert.deepEqual(
    records.filter((r) => Number(r.level) >= 50),
    [],
    'a runtime breaking its stream is nothing to log as an error',
  )
})

test('a Redis that goes away while the reader appends is the bus failing, not the runtime: counted as such, then resumed', async (t) => {
  const redis = await startRedisServer()
  t.after(() => redis.stop())
  const logs = captureLogs('info')
  const gw = await startGateway(
    {
      ...fastEventEnv,
      REDIS_URL: redis.url,
      GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    },
    { logger: logs.logger },
  )
  t.after(() => gw.close())
  const rt = await addRuntimeSession(t, gw.app)
  const viewer = await openSse(`${gw.url}/desktop/s1/mcp/events`, {
    authorization: `Bearer ${await bearer()}`,
  })
  t.after(() => viewer.close())
  rt.emit('step', { n: 1 })
  await eventsAtLeast(viewer, 2)

  await redis.stop()
  rt.emit('step', { n: 'during the outage' })
  await until('the append failure counted', async () => (await reconnects(gw.url)).bus_failed >= 1)
  const during = await reconnects(gw.url)
  assert.equal(during.dropped, 0, 'the runtime did not drop its stream')
  assert.equal(during.stream_dropped, 0)
  assert.equal(during.internal_error, 0)

  await redis.start()
  const sentinel = rt.emit('step', { n: 'sentinel' }).seq
  await until('the sentinel', () => viewer.ids().at(-1) === `${rt.run}:${sentinel}`)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, sentinel), 'nothing lost or repeated over the outage')
  const failed = logs.records().find((r) => r.msg === 'event bus append failed; reader waiting for the bus')
  assert.ok(failed === undefined || Number(failed.level) <= 40, 'never an error')
  assert.equal((await reconnects(gw.url)).dropped, 0)
})

/** Session `k` served at `upstream`, as the registry hands it to a reader. */
const sessionAt = (upstream: string): Session => ({
  kasmId: 'k',
  upstream,
  team: 'blue',
  messagingToken: new Secret(TOKEN),
  source: 'admin',
  version: 1,
})

test('a bug in gap filling is logged at error with its error and counted as ours, not as a drop', async (t) => {
  const bus = new MemoryEventBus({ capacity: 100 })
  const got: number[] = []
  await bus.subscribe(
    'k',
    {},
    {
      deliver(batch: readonly Delivery[]) {
        for (const d of batch) if (d.message.kind === 'event') got.push(d.message.seq)
      },
    },
  )
  // The first connection sends 1, then (once 1 is stored) 3: a gap to fill. A reconnect gets what follows.
  const upstream = await rawRuntime(t, (stream) => {
    if (stream.after === 0) {
      stream.send(eventText('r1', 1))
      until('1 stored', () => got.includes(1)).then(() => stream.send(eventText('r1', 3)))
    } else {
      stream.send(eventText('r1', 2) + eventText('r1', 3))
    }
  })
  const agent = new Agent()
  t.after(() => agent.close())
  const backfill = new TraceBackfill({ dispatcherFor: () => agent })
  // Fault injection: the one way to make the gateway's own code throw on purpose.
  backfill.fill = async () => {
    throw new TypeError('a bug in gap filling')
  }
  const logs = captureLogs('info')
  const { registry, metrics } = eventMetrics()
  const session = sessionAt(upstream)
  const reader = new UpstreamReader({
    kasmId: 'k',
    session: async () => session,
    bus,
    fence: 1,
    dispatcherFor: () => agent,
    backfill,
    timing: {
      notUpPollMs: 20,
      backoffMs: [20],
      idleTimeoutMs: 10_000,
      closedPollMs: 100,
      refusedRetryMs: 100,
    },
    log: pino(logs.logger, logs.logger.stream),
    metrics,
    maxEventBytes: 1 << 20,
  })
  reader.start()
  t.after(() => reader.stop())
  await until('the events after the reconnect', () => got.at(-1) === 3)
  assert.deepEqual(got, [1, 2, 3])
  const error = logs.records().find((r) => Number(r.level) >= 50)
  assert.equal(error?.msg, 'event reader failed on the upstream stream; reconnecting')
  assert.match(JSON.stringify(error?.err), /a bug in gap filling/)
  const families = parseExposition(await registry.metrics())
  const reason = (r: string) => sampleValue(families, 'krg_event_upstream_reconnects_total', { reason: r })
  assert.equal(reason('internal_error'), 1)
  assert.equal(reason('dropped'), 0)
  assert.equal(sampleValue(families, 'krg_upstream_errors_total', { reason: 'stream_dropped' }), undefined)
})

test('trace backfill: a fault of our own reaches onFault; a trace that cannot be read is only an unfilled gap', async (t) => {
  const lines = [
    JSON.stringify({ seq: 1, type: 'info', ts: 't', info: { run_id: 'r1' } }),
    JSON.stringify({ seq: 2, type: 'log', ts: 't', log: { msg: `echo ${TOKEN}` } }),
  ]
  const server = http.createServer((_req, res) => res.end(`${lines.join('\n')}\n`))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  const address = server.address()
  assert.ok(address !== null && typeof address === 'object')
  const agent = new Agent()
  t.after(() => agent.close())
  const faults: unknown[] = []
  const backfill = new TraceBackfill({
    dispatcherFor: () => agent,
    // A callback of ours that throws while a line is handled stands for any bug in the line handling.
    onTokenEcho: () => {
      throw new RangeError('a bug while masking')
    },
    onFault: (err) => faults.push(err),
  })
  assert.equal(await backfill.fill(sessionAt(`http://127.0.0.1:${address.port}/`), 'r1', 2, 2), null)
  assert.equal(faults.length, 1)
  assert.match(String(faults[0]), /a bug while masking/)

  // A runtime that is not there: the gap stays, and nothing is reported as a fault.
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const gone = closed.address()
  assert.ok(gone !== null && typeof gone === 'object')
  await new Promise((resolve) => closed.close(resolve))
  assert.equal(await backfill.fill(sessionAt(`http://127.0.0.1:${gone.port}/`), 'r1', 2, 2), null)
  assert.equal(faults.length, 1)
})
