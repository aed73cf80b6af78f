import assert from 'node:assert/strict'
import { test } from 'node:test'
import { eventsAtLeast, idRange, openSse, startStack, until } from './helpers.ts'

test('a new run reaches viewers with its run line and the buffer starts over', async (t) => {
  const { rt, token, eventsUrl } = await startStack(t)
  const auth = { authorization: `Bearer ${token}` }
  const viewer = await openSse(eventsUrl, auth)
  t.after(() => viewer.close())
  rt.emit('step', { n: 1 })
  rt.emit('step', { n: 2 })
  await eventsAtLeast(viewer, 3)
  const oldRun = rt.run
  const newRun = rt.newRun()
  rt.emit('step', { n: 1 })
  await eventsAtLeast(viewer, 5)
  assert.deepEqual(viewer.ids(), [...idRange(oldRun, 1, 3), ...idRange(newRun, 1, 2)])
  assert.ok(viewer.text().includes(`\n\n: run ${newRun}\nid: ${newRun}:1\nevent: info\n`))
  assert.equal(viewer.events[3]?.event, 'info')
  assert.match(viewer.events[3]?.data ?? '', new RegExp(`"run_id":"${newRun}"`))

  // A viewer of the old run resumes into the new run from its first event: the old run is gone.
  const late = await openSse(eventsUrl, { ...auth, 'last-event-id': `${oldRun}:2` })
  t.after(() => late.close())
  await eventsAtLeast(late, 2)
  assert.deepEqual(late.ids(), idRange(newRun, 1, 2))
  assert.ok(late.text().startsWith(`: run ${newRun}\n`))
  assert.equal(rt.eventConnections, 1, 'the new run arrived on the same upstream stream')
})

test('closed: viewers get event: closed and their stream ends; no reconnect until a new run', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, { GATEWAY_STREAM_LINGER_MS: '10000' })
  const auth = { authorization: `Bearer ${token}` }
  const viewers = await Promise.all([1, 2, 3].map(() => openSse(eventsUrl, auth)))
  t.after(() => {
    for (const v of viewers) v.close()
  })
  rt.emit('step', { n: 1 })
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 2)))
  const run = rt.run
  rt.closeTrace()
  for (const v of viewers) {
    assert.equal(await v.ended, 'end', 'the stream ends cleanly')
    assert.ok(
      v
        .text()
        .endsWith(`id: ${run}:2\nevent: step\ndata: ${v.events[1]?.data}\n\nevent: closed\ndata: {}\n\n`),
    )
    assert.equal(v.events.at(-1)?.event, 'closed')
    assert.equal(v.events.at(-1)?.data, '{}')
  }
  const reader = gw.app.events.streams.reader('s1')
  await until('the reader to wait for a new run', () => reader?.state === 'closed')
  const inboxPolls = () => rt.received.filter((r) => r.url === '/inbox').length
  const connections = rt.eventConnections
  await until('a few inbox polls', () => inboxPolls() >= 3)
  assert.equal(rt.eventConnections, connections, 'no event stream while the run is closed')

  // A viewer arriving now gets the replay and the closed frame, and its stream ends.
  const late = await openSse(eventsUrl, auth)
  assert.equal(await late.ended, 'end')
  assert.deepEqual(
    late.events.map((e) => e.event),
    ['info', 'step', 'closed'],
  )

  const next = rt.newRun()
  await until('the reader to follow the new run', () => reader?.state === 'live')
  const fresh = await openSse(eventsUrl, { ...auth, 'last-event-id': `${run}:2` })
  t.after(() => fresh.close())
  rt.emit('step', { n: 1 })
  await eventsAtLeast(fresh, 2)
  assert.deepEqual(fresh.ids(), idRange(next, 1, 2))
  assert.equal(rt.eventConnections, connections + 1)
})

test('eager mode reads every registered session without viewers; removing a session ends its viewers', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, { GATEWAY_STREAM_EAGER: 'true' })
  await until('the eager reader to connect', () => rt.openEventStreams === 1)
  assert.equal(gw.app.events.streams.stats().viewers, 0)
  rt.emit('step', { n: 1 })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  await eventsAtLeast(viewer, 2)
  assert.deepEqual(viewer.ids(), idRange(rt.run, 1, 2))
  viewer.close()
  await until('the viewer to leave', () => gw.app.events.streams.stats().viewers === 0)
  assert.equal(gw.app.events.streams.stats().readers, 1, 'an eager reader stays without viewers')

  const again = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  await eventsAtLeast(again, 2)
  assert.equal(await gw.app.sessions.remove('s1'), true)
  assert.equal(await again.ended, 'end', 'the viewer of a removed session loses its stream')
  await until('the reader to stop', () => gw.app.events.streams.stats().readers === 0)
  await until('the upstream connection to close', () => rt.openEventStreams === 0)
  assert.equal(await gw.app.events.bus.head('s1'), null, 'its events are forgotten')
})
