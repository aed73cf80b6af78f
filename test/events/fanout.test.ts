import assert from 'node:assert/strict'
import { test } from 'node:test'
import { EventSource } from 'eventsource'
import { eventsAtLeast, idRange, openSse, startStack, until } from './helpers.ts'

test('50 viewers share one upstream connection and get the runtime bytes in the protocol format', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t)
  const auth = { authorization: `Bearer ${token}` }
  const viewers = await Promise.all(Array.from({ length: 50 }, () => openSse(eventsUrl, auth)))
  t.after(() => {
    for (const v of viewers) v.close()
  })
  for (const v of viewers) {
    assert.equal(v.status, 200)
    assert.equal(v.headers['content-type'], 'text/event-stream')
    assert.equal(v.headers['cache-control'], 'no-store')
    assert.equal(v.headers['x-accel-buffering'], 'no')
  }
  // The runtime emitted its info event (seq 1) at start; each viewer replays it.
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 1)))
  const lines = [1, 2, 3].map(
    (n) => rt.emit('log', { level: 'info', msg: `line ${n}`, multi: 'a\u2028b' }).line,
  )
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 4)))

  assert.equal(rt.eventConnections, 1, 'the runtime saw exactly one event connection')
  assert.equal(rt.openEventStreams, 1)
  assert.equal(gw.app.events.streams.stats().readers, 1)

  const run = rt.run
  const first = viewers[0]
  assert.ok(first)
  assert.ok(
    first.text().startsWith(`: run ${run}\nid: ${run}:1\nevent: info\ndata: `),
    first.text().slice(0, 80),
  )
  for (const [i, line] of lines.entries()) {
    assert.ok(
      first.text().includes(`id: ${run}:${i + 2}\nevent: log\ndata: ${line}\n\n`),
      'data byte-identical',
    )
  }
  for (const v of viewers) {
    assert.deepEqual(v.ids(), idRange(run, 1, 4))
    // Pings depend on when each viewer joined the shared heartbeat; everything else is the same bytes.
    assert.equal(v.text(), first.text(), 'same bytes')
  }
})

test('an EventSource client (bearer through fetch) reads, pings arrive, a reconnect resumes', async (t) => {
  // A linger keeps the reader through the moment no viewer is connected.
  const { rt, gw, token, eventsUrl } = await startStack(t, { GATEWAY_STREAM_LINGER_MS: '5000' })
  const got: Array<{ id: string; type: string; data: string }> = []
  const es = new EventSource(eventsUrl, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` },
      }),
  })
  t.after(() => es.close())
  for (const type of ['info', 'log']) {
    es.addEventListener(type, (e) => got.push({ id: e.lastEventId, type, data: e.data }))
  }
  await until('the info event', () => got.length >= 1)
  rt.emit('log', { level: 'warn', msg: 'x' })
  await until('the log event', () => got.length >= 2)
  assert.deepEqual(
    got.map((g) => g.id),
    idRange(rt.run, 1, 2),
  )

  // Pings reach a raw reader every GATEWAY_PING_INTERVAL_MS (200 ms here).
  const raw = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => raw.close())
  await until('two pings', () => raw.comments.filter((c) => c === 'ping').length >= 2)

  // Cut the viewer's connection from the gateway side: EventSource reconnects with Last-Event-ID.
  const before = rt.eventConnections
  for (const viewer of [...viewersOf(gw.app)]) viewer.end('shutdown')
  rt.emit('log', { level: 'info', msg: 'while away' })
  await until('the event emitted while reconnecting', () => got.length >= 3)
  assert.deepEqual(
    got.map((g) => g.id),
    idRange(rt.run, 1, 3),
    'no duplicate and no gap across the reconnect',
  )
  assert.equal(rt.eventConnections, before, 'viewer reconnects never reach the runtime (reader lingered)')
})

/** The viewer streams of the gateway (through the bus-independent coordinator's public surface). */
function viewersOf(app: import('fastify').FastifyInstance) {
  return app.events.streams.viewers()
}

test('viewer disconnects free everything: no viewer, reader, subscriber, timer or runtime connection left', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t)
  const timersBefore = countTimers()
  const auth = { authorization: `Bearer ${token}` }
  const viewers = await Promise.all(Array.from({ length: 20 }, () => openSse(eventsUrl, auth)))
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 1)))
  rt.emit('log', { level: 'info', msg: 'x' })
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 2)))
  const streams = gw.app.events.streams
  assert.equal(streams.stats().viewers, 20)
  assert.equal(streams.stats().heartbeatTargets, 20)

  for (const v of viewers) v.close()
  await until('the gateway to see every viewer leave', () => streams.stats().viewers === 0)
  await until('the reader to stop (linger 0)', () => streams.stats().readers === 0)
  assert.deepEqual(streams.stats(), { viewers: 0, sessions: 0, readers: 0, heartbeatTargets: 0, timers: 0 })
  const bus = gw.app.events.bus as import('../../src/events/memory-bus.ts').MemoryEventBus
  assert.equal(bus.stats().subscribers, 0)
  await until('the upstream connection to close', () => rt.openEventStreams === 0)
  await until('no timers left beyond the baseline', () => countTimers() <= timersBefore)
  const metrics = await gw.app.metrics.registry.getSingleMetricAsString('krg_event_viewers')
  assert.match(metrics, /krg_event_viewers 0/)
})

/** Timers alive in this process (node:test and the apps own a few; the test compares before and after). */
function countTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
}
