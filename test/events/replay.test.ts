import assert from 'node:assert/strict'
import { test } from 'node:test'
import { eventsAtLeast, idRange, openSse, startStack } from './helpers.ts'

test('replay by after/run and by Last-Event-ID gives exactly the missed events, then live', async (t) => {
  const { rt, token, eventsUrl } = await startStack(t, { GATEWAY_STREAM_LINGER_MS: '5000' })
  const auth = { authorization: `Bearer ${token}` }
  const first = await openSse(eventsUrl, auth)
  t.after(() => first.close())
  for (let i = 0; i < 9; i++) rt.emit('step', { n: i })
  await eventsAtLeast(first, 10)
  const run = rt.run

  const byQuery = await openSse(`${eventsUrl}?after=4&run=${encodeURIComponent(run)}`, auth)
  t.after(() => byQuery.close())
  await eventsAtLeast(byQuery, 6)
  assert.deepEqual(byQuery.ids(), idRange(run, 5, 10))
  assert.ok(byQuery.text().startsWith(`: run ${run}\nid: ${run}:5\n`))

  // Last-Event-ID wins over the query (EventSource keeps its original URL on reconnect).
  const byHeader = await openSse(`${eventsUrl}?after=1&run=${encodeURIComponent(run)}`, {
    ...auth,
    'last-event-id': `${run}:8`,
  })
  t.after(() => byHeader.close())
  await eventsAtLeast(byHeader, 2)
  assert.deepEqual(byHeader.ids(), idRange(run, 9, 10))

  // Another run, or none, starts from the current run's first buffered event.
  const otherRun = await openSse(`${eventsUrl}?after=4&run=run-that-was`, auth)
  t.after(() => otherRun.close())
  const noRun = await openSse(`${eventsUrl}?after=4`, auth)
  t.after(() => noRun.close())
  const badHeader = await openSse(eventsUrl, { ...auth, 'last-event-id': 'no-seq-here' })
  t.after(() => badHeader.close())
  for (const c of [otherRun, noRun, badHeader]) {
    await eventsAtLeast(c, 10)
    assert.deepEqual(c.ids(), idRange(run, 1, 10))
  }

  const atEnd = await openSse(eventsUrl, { ...auth, 'last-event-id': `${run}:10` })
  t.after(() => atEnd.close())
  rt.emit('step', { n: 'live' })
  for (const c of [byQuery, byHeader, otherRun, atEnd]) await eventsAtLeast(c, c === atEnd ? 1 : 2)
  assert.deepEqual(atEnd.ids(), [`${run}:11`])
  assert.deepEqual(byHeader.ids(), idRange(run, 9, 11))
  assert.equal(rt.eventConnections, 1)
})

test('a malformed after or run is refused with 400 before any stream opens', async (t) => {
  const { gw, token, eventsUrl } = await startStack(t)
  const auth = { authorization: `Bearer ${token}` }
  for (const query of [
    'after=-1&run=r',
    'after=1.5&run=r',
    'after=abc',
    'after=1&after=2&run=r',
    'run=a%20b&after=1',
  ]) {
    const c = await openSse(`${eventsUrl}?${query}`, auth)
    assert.equal(c.status, 400, query)
    assert.equal((c.body as { error: string }).error, 'bad_request', query)
  }
  assert.equal(gw.app.events.streams.stats().viewers, 0)
})

test('a gap the buffer cannot fill is filled from trace.jsonl, byte for byte', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, {
    GATEWAY_EVENT_BUFFER: '16',
    GATEWAY_STREAM_LINGER_MS: '5000',
  })
  const auth = { authorization: `Bearer ${token}` }
  const live = await openSse(eventsUrl, auth)
  t.after(() => live.close())
  const lines = new Map<number, string>()
  for (let i = 0; i < 39; i++) {
    const { seq, line } = rt.emit('log', { level: 'info', msg: `m${i}` })
    lines.set(seq, line)
  }
  await eventsAtLeast(live, 40)
  const run = rt.run
  // The gateway holds 25..40; a viewer at 2 misses 3..24, which only the trace has.
  const behind = await openSse(eventsUrl, { ...auth, 'last-event-id': `${run}:2` })
  t.after(() => behind.close())
  await eventsAtLeast(behind, 38)
  assert.deepEqual(behind.ids(), idRange(run, 3, 40))
  for (const e of behind.events) {
    const seq = Number(e.id?.split(':').at(-1))
    assert.equal(e.data, lines.get(seq), `event ${seq} is the runtime's line`)
  }
  // And live events keep flowing after the fill, in order.
  rt.emit('log', { level: 'info', msg: 'after fill' })
  await eventsAtLeast(behind, 39)
  assert.deepEqual(behind.ids().slice(-2), [`${run}:40`, `${run}:41`])
  assert.equal(gw.app.events.streams.stats().viewers, 2)
})

test('a gap that neither the buffer nor the trace can fill is shown, never reordered or duplicated', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, {
    GATEWAY_EVENT_BUFFER: '16',
    GATEWAY_STREAM_LINGER_MS: '5000',
  })
  const auth = { authorization: `Bearer ${token}` }
  const live = await openSse(eventsUrl, auth)
  t.after(() => live.close())
  for (let i = 0; i < 39; i++) rt.emit('log', { level: 'info', msg: `m${i}` })
  await eventsAtLeast(live, 40)
  const run = rt.run
  // The runtime's proxy answers 502 to new requests (the open stream carries on): trace.jsonl is unreachable.
  rt.setDown(502)
  const behind = await openSse(eventsUrl, { ...auth, 'last-event-id': `${run}:2` })
  t.after(() => behind.close())
  await eventsAtLeast(behind, 16)
  assert.deepEqual(behind.ids(), idRange(run, 25, 40))
  rt.emit('log', { level: 'info', msg: 'still live' })
  await eventsAtLeast(behind, 17)
  assert.deepEqual(behind.ids(), idRange(run, 25, 41))
  const metric = await gw.app.metrics.registry.getSingleMetricAsString('krg_event_gaps_unfilled_total')
  assert.match(metric, /krg_event_gaps_unfilled_total 1/)
})
