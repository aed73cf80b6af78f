import assert from 'node:assert/strict'
import { test } from 'node:test'
import { eventsAtLeast, idRange, openSse, startStack, until } from './helpers.ts'

test('a slow viewer is disconnected at the queued-bytes bound and catches up with Last-Event-ID', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, {
    GATEWAY_VIEWER_MAX_QUEUED_BYTES: String(1024 * 1024),
    GATEWAY_STREAM_LINGER_MS: '5000',
    // Room for the whole run below (24 MiB of payload, stored with its frames): this test is about the slow
    // viewer, not the buffer's byte budget (test/events/hostile-events.test.ts).
    GATEWAY_EVENT_BUFFER_BYTES: String(64 * 1024 * 1024),
  })
  const auth = { authorization: `Bearer ${token}` }
  const fast = await openSse(eventsUrl, auth)
  t.after(() => fast.close())
  const slow = await openSse(eventsUrl, auth)
  t.after(() => slow.close())
  await Promise.all([eventsAtLeast(fast, 1), eventsAtLeast(slow, 1)])
  slow.pause()
  // ~24 MiB: more than loopback's socket buffers can absorb, so bytes queue up in the gateway. Emitted at
  // the pace of the fast viewer (which shares this process's event loop) so that only the paused one lags.
  const filler = 'x'.repeat(96 * 1024)
  for (let i = 0; i < 256; i++) {
    rt.emit('log', { level: 'info', msg: filler })
    if (i % 4 === 3) await eventsAtLeast(fast, i + 2)
  }
  await eventsAtLeast(fast, 257)
  await until('the slow viewer to be dropped', () => gw.app.events.streams.stats().viewers === 1)
  assert.match(
    await gw.app.metrics.registry.getSingleMetricAsString('krg_event_slow_consumers_dropped_total'),
    /krg_event_slow_consumers_dropped_total 1/,
  )
  assert.deepEqual(fast.ids(), idRange(rt.run, 1, 257), 'the fast viewer was not held back')

  // The slow viewer reads what reached it, sees the end, and resumes from its last id.
  slow.resume()
  await slow.ended
  const last = slow.ids().at(-1)
  assert.ok(last !== undefined && last !== `${rt.run}:257`, `the slow viewer was behind (${last})`)
  const resumed = await openSse(eventsUrl, { ...auth, 'last-event-id': last })
  t.after(() => resumed.close())
  const missing = 257 - Number(last.split(':').at(-1))
  await eventsAtLeast(resumed, missing)
  assert.deepEqual([...slow.ids(), ...resumed.ids()], idRange(rt.run, 1, 257))
})
