import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import type pino from 'pino'
import { eventsAtLeast, idRange, openSse, startStack, TOKEN, until } from './helpers.ts'

async function metric(app: import('fastify').FastifyInstance, name: string): Promise<string> {
  return app.metrics.registry.getSingleMetricAsString(name)
}

/**
 * A stack whose runtime pings every 100 ms and whose gateway takes 400 ms of silence for a stall, a viewer that has
 * its first event, and the count of the gateway's own heartbeats (every 200 ms) the viewer has had.
 */
async function pingedStack(t: import('node:test').TestContext) {
  const { rt, gw, token, eventsUrl } = await startStack(
    t,
    { GATEWAY_UPSTREAM_IDLE_TIMEOUT_MS: '400' },
    { pingIntervalMs: 100 },
  )
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 1)
  const pings = () => viewer.comments.filter((c) => c.trim() === 'ping').length
  return { rt, gw, viewer, pings }
}

test('upstream drops while events are emitted: no gap, no duplicate, order kept', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t)
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 1)
  // Emit in bursts and cut the upstream connection between (and during) them.
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < 20; i++) rt.emit('step', { round, i })
    rt.dropStreams()
    for (let i = 0; i < 10; i++) rt.emit('log', { level: 'info', msg: `${round}/${i}` })
    await until('the reader to reconnect', () => rt.openEventStreams === 1)
  }
  await eventsAtLeast(viewer, 151)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 151))
  assert.ok(rt.eventConnections >= 6)
  assert.match(await metric(gw.app, 'krg_event_upstream_reconnects_total'), /reason="dropped"\} [1-9]/)
  assert.match(await metric(gw.app, 'krg_upstream_errors_total'), /reason="stream_dropped"\} [1-9]/)
})

test('runtime down (502) then up: the reader polls, then streams; viewers get everything', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t)
  rt.setDown(502)
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  const polls = () => rt.received.filter((r) => r.url.startsWith('/events')).length
  await until('a few polls while down', () => polls() >= 3)
  assert.equal(viewer.events.length, 0)
  assert.equal(gw.app.events.streams.reader('s1')?.state === 'live', false)
  rt.emit('step', { n: 1 })
  rt.setDown(null)
  await eventsAtLeast(viewer, 2)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 2))
  assert.match(await metric(gw.app, 'krg_event_upstream_reconnects_total'), /reason="not_up"\} [1-9]/)
})

test('a stalled upstream (no byte, no ping) is detected and replaced without loss', async (t) => {
  const { rt, gw, viewer, pings } = await pingedStack(t)
  // Pings (every 100 ms) keep a healthy stream alive past the 400 ms idle limit: the gateway's own heartbeat
  // (200 ms) is the clock, then a sentinel event shows the first connection still carries the stream.
  await until('four heartbeats, twice the idle limit', () => pings() >= 4)
  rt.emit('step', { n: 'sentinel' })
  await eventsAtLeast(viewer, 2)
  assert.equal(rt.eventConnections, 1)
  rt.stallStreams(true)
  rt.emit('step', { n: 'during stall' })
  await until('a second upstream connection', () => rt.eventConnections >= 2)
  await eventsAtLeast(viewer, 3)
  rt.stallStreams(false)
  rt.emit('step', { n: 'after' })
  await eventsAtLeast(viewer, 4)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 4))
  assert.match(await metric(gw.app, 'krg_event_upstream_reconnects_total'), /reason="stalled"\} [1-9]/)
  assert.match(await metric(gw.app, 'krg_upstream_errors_total'), /reason="stream_stalled"\} [1-9]/)
})

test('a pause of the gateway’s own process is not a stalled upstream: the bytes that came meanwhile count', async (t) => {
  const { rt, gw, viewer, pings } = await pingedStack(t)
  await until('the reader live', () => gw.app.events.streams.reader('s1')?.state === 'live')
  // A byte has come since: the idle timer is running.
  const seen = pings()
  await until('a heartbeat', () => pings() > seen)
  assert.equal(rt.eventConnections, 1)
  // The process (gateway and runtime alike) stops for well past the idle limit, as under a long GC pause or a
  // starved CPU. When it runs again, the runtime's ping and the gateway's idle timer are both due.
  const resumeAt = Date.now() + 1500
  while (Date.now() < resumeAt) {
    // busy: nothing else of the process runs
  }
  // Two of the gateway's own heartbeats after the pause: its idle timer, due long before them, has fired.
  const afterPause = pings()
  await until('two heartbeats after the pause', () => pings() >= afterPause + 2)
  rt.emit('step', { n: 'after the pause' })
  await eventsAtLeast(viewer, 2)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 2))
  assert.equal(rt.eventConnections, 1, 'the stream was kept')
  assert.doesNotMatch(await metric(gw.app, 'krg_event_upstream_reconnects_total'), /reason="stalled"\} [1-9]/)
})

test('a refused token (401) is counted and logged without the token, retried until rotated', async (t) => {
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  const { rt, gw, token, eventsUrl } = await startStack(
    t,
    { GATEWAY_UPSTREAM_RETRY_SCALE: '0.005' },
    {},
    {
      logger: { level: 'debug', stream: sink } as unknown as pino.LoggerOptions,
    },
  )
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 1)
  const secret = 'rotated-token-never-logged-123'
  rt.rotateTokens({ messagingToken: secret })
  rt.dropStreams()
  rt.emit('input', { kind: 'key', key: 'PAYLOAD-MARKER-typed-by-a-person' })
  await until('token_refused in metrics', () => lines.some((l) => l.includes('refused the messaging token')))
  assert.match(await metric(gw.app, 'krg_upstream_errors_total'), /reason="token_refused"\} [1-9]/)
  assert.equal(viewer.events.length, 1, 'nothing arrives while the token is refused')
  // Ten of the gateway's heartbeats (200 ms each, 2 s or more) as the clock for the retry rate. A refused
  // token is retried every 150 ms here (30 s scaled by 0.005): at most about 14 attempts in that window, and
  // a load can only make it fewer. Retrying it like a dropped stream (5 to 50 ms) would make 40 or more.
  const attempts = () => rt.received.filter((r) => r.url.startsWith('/events')).length
  const pings = () => viewer.comments.filter((c) => c.trim() === 'ping').length
  const pingsBefore = pings()
  const attemptsBefore = attempts()
  await until('ten heartbeats', () => pings() >= pingsBefore + 10)
  const refusedAttempts = attempts() - attemptsBefore
  assert.ok(refusedAttempts <= 20, `retried slowly (${refusedAttempts} attempts in ten heartbeats)`)

  await gw.app.sessions.put({
    kasmId: 's1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: secret,
    source: 'admin',
  })
  await eventsAtLeast(viewer, 2)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 2))
  assert.equal(viewer.events[1]?.event, 'input')
  const log = lines.join('')
  assert.ok(!log.includes(secret), 'the token never appears in a log line')
  assert.ok(!log.includes(TOKEN), 'nor the old one')
  assert.ok(!log.includes('PAYLOAD-MARKER'), 'event payloads are never logged')
})

test('events the runtime no longer buffers after an outage are filled from its trace', async (t) => {
  const { rt, token, eventsUrl } = await startStack(t, {}, { replayEvents: 8 })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  rt.emit('step', { n: 1 })
  await eventsAtLeast(viewer, 2)
  // The reader is cut off (and kept off by 502s) while 30 events pass: the runtime keeps only the last 8.
  rt.setDown(502)
  rt.dropStreams()
  for (let i = 0; i < 30; i++) rt.emit('step', { n: i + 2 })
  rt.setDown(null)
  await eventsAtLeast(viewer, 32)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 32))
  const traceFetches = rt.received.filter((r) => r.url === '/artifacts/trace.jsonl').length
  assert.equal(traceFetches, 1, 'the gap was filled from trace.jsonl')
})

test('a reader whose lease was taken stops appending; the replica takes the lease back without loss', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, { GATEWAY_LEASE_MS: '1000' })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 1)
  const before = gw.app.events.streams.reader('s1')
  // Another owner takes the lease: the current reader's fence is stale from now on.
  const stolen = await gw.app.events.lease.acquire('s1')
  assert.ok(stolen !== null)
  rt.emit('step', { n: 1 })
  await until('the stale reader to be replaced', () => {
    const now = gw.app.events.streams.reader('s1')
    return now !== null && now !== before
  })
  rt.emit('step', { n: 2 })
  await eventsAtLeast(viewer, 3)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 3))
  assert.equal(before?.state, 'stopped')
})
