import assert from 'node:assert/strict'
import { request } from 'node:http'
import { test } from 'node:test'
import { EventSource } from 'eventsource'
import {
  call,
  frames,
  MESSAGING,
  openStream,
  SESSION,
  startRuntime,
  TOKEN_HEADER,
  waitFor,
} from './helpers.ts'

test('a stream starts with the run comment and carries trace lines as frames', async (t) => {
  const rt = await startRuntime(t)
  const log = rt.emit('log', { level: 'info', msg: 'hello' })
  const stream = await openStream(t, rt.url, 'events')
  assert.equal(stream.status, 200)
  assert.equal(stream.headers['content-type'], 'text/event-stream')
  assert.equal(stream.headers['cache-control'], 'no-store')
  assert.equal(stream.headers['x-accel-buffering'], 'no')
  await waitFor('the replayed log', () => stream.events.length >= 2)
  assert.ok(
    stream.raw.startsWith(`: run ${rt.run}\nid: ${rt.run}:1\nevent: info\ndata: {"seq":1,"type":"info"`),
  )
  assert.ok(stream.raw.includes(`id: ${rt.run}:${log.seq}\nevent: log\ndata: ${log.line}\n\n`))

  const step = rt.emit('step', { n: 1, action: 'click' })
  const delivery = rt.emit('delivery', { id: 'm1', state: 'queued' })
  const done = rt.emit('done', { ignored: true })
  await waitFor('the live frames', () => stream.events.length >= 5)
  assert.deepEqual(JSON.parse(step.line), {
    seq: step.seq,
    type: 'step',
    ts: JSON.parse(step.line).ts,
    step: { n: 1, action: 'click' },
  })
  assert.deepEqual(Object.keys(JSON.parse(delivery.line)), ['seq', 'type', 'ts', 'message'])
  assert.deepEqual(Object.keys(JSON.parse(done.line)), ['seq', 'type', 'ts'])
  const got = frames(stream)
  assert.deepEqual(
    got.map((f) => [f.id, f.event]),
    [
      [`${rt.run}:1`, 'info'],
      [`${rt.run}:2`, 'log'],
      [`${rt.run}:3`, 'step'],
      [`${rt.run}:4`, 'delivery'],
      [`${rt.run}:5`, 'done'],
    ],
  )
  assert.deepEqual(
    stream.events.map((e) => e.data),
    (await (await fetch(`${rt.url}artifacts/trace.jsonl`)).text()).trimEnd().split('\n'),
    'each data line is exactly a trace.jsonl line',
  )
  assert.equal((got[0]?.data.info as Record<string, unknown> | undefined)?.run_id, rt.run)
  assert.throws(() => rt.emit('log', { msg: 'after done' }), /ended/)
  assert.equal(stream.ended, false, 'a stream stays open after done')
})

test('replay: after= only for the run being served, Last-Event-ID the same and winning', async (t) => {
  const rt = await startRuntime(t)
  for (let i = 0; i < 5; i++) rt.emit('log', { level: 'info', msg: `line ${i}` }) // seq 2..6
  const seqs = (s: { events: Array<{ id?: string | undefined }> }) =>
    s.events.map((e) => Number(e.id?.split(':').pop()))

  const resumed = await openStream(t, rt.url, `events?after=4&run=${rt.run}`)
  const otherRun = await openStream(t, rt.url, 'events?after=4&run=some-older-run')
  const noRun = await openStream(t, rt.url, 'events?after=4')
  const header = await openStream(t, rt.url, 'events?after=1&run=x', { 'last-event-id': `${rt.run}:5` })
  const stale = await openStream(t, rt.url, 'events', { 'last-event-id': 'old-run:3' })
  const streams = [resumed, otherRun, noRun, header, stale]
  await waitFor('the replays', () => streams.every((s) => s.events.length >= 1))

  // The sentinel: a live event comes after every replayed one, so once it arrived no replay is still on its way.
  const live = rt.emit('log', { msg: 'live' })
  await waitFor('live event on every stream', () =>
    streams.every((s) => s.events.some((e) => e.data === live.line)),
  )
  assert.equal(live.seq, 7)
  assert.deepEqual(seqs(resumed), [5, 6, 7])
  assert.deepEqual(seqs(otherRun), [1, 2, 3, 4, 5, 6, 7])
  assert.deepEqual(seqs(noRun), [1, 2, 3, 4, 5, 6, 7])
  assert.deepEqual(seqs(header), [6, 7], 'Last-Event-ID wins over the query')
  assert.deepEqual(seqs(stale), [1, 2, 3, 4, 5, 6, 7])

  const bad = await call(rt.url, 'GET', 'events?after=abc')
  assert.equal(bad.status, 400)
  assert.equal(bad.body.error, 'invalid_after')
})

test('the replay buffer holds the last replayEvents events; the trace keeps all', async (t) => {
  const rt = await startRuntime(t, { replayEvents: 5 })
  for (let i = 0; i < 20; i++) rt.emit('log', { msg: `line ${i}` }) // seq 2..21
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('the buffered events', () => stream.events.length >= 5)
  // The sentinel: once the live event arrived, the replay before it is complete.
  const live = rt.emit('log', { msg: 'sentinel' })
  await waitFor('the sentinel', () => stream.events.some((e) => e.data === live.line))
  assert.deepEqual(
    stream.events.map((e) => e.id),
    [17, 18, 19, 20, 21, 22].map((seq) => `${rt.run}:${seq}`),
  )
  const resumed = await openStream(t, rt.url, `events?run=${rt.run}&after=3`)
  await waitFor('gap replay', () => resumed.events.length >= 5)
  // The sentinel moved the buffer on by one: it holds 18..22.
  assert.equal(resumed.events[0]?.id, `${rt.run}:18`, 'a client behind the buffer sees a gap in seq')
  const trace = await (await fetch(`${rt.url}artifacts/trace.jsonl`)).text()
  assert.equal(trace.trimEnd().split('\n').length, 22)
})

test('pings arrive every pingIntervalMs', async (t) => {
  const rt = await startRuntime(t, { pingIntervalMs: 40 })
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('two pings', () => stream.comments.filter((c) => c.trim() === 'ping').length >= 2)
  assert.ok(stream.raw.includes('\n: ping\n\n'))
})

test('a new run: open streams get a fresh run comment and the new run from its info event', async (t) => {
  const rt = await startRuntime(t)
  rt.emit('log', { msg: 'old run' })
  const oldRun = rt.run
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('old events', () => stream.events.length >= 2)
  const newRun = rt.newRun()
  assert.notEqual(newRun, oldRun)
  assert.equal(rt.run, newRun)
  rt.emit('log', { msg: 'new run' })
  await waitFor('new run events', () => stream.events.length >= 4)
  const tail = stream.raw.slice(stream.raw.indexOf(`: run ${newRun}\n`))
  assert.ok(tail.startsWith(`: run ${newRun}\nid: ${newRun}:1\nevent: info\n`), tail.slice(0, 120))
  const info = frames(stream)[2]?.data.info as Record<string, unknown>
  assert.equal(info.run_id, newRun)
  assert.deepEqual(
    stream.comments.filter((c) => c.startsWith('run ')),
    [`run ${oldRun}`, `run ${newRun}`],
  )

  // Resuming the old run starts from the new run's first event.
  const resumed = await openStream(t, rt.url, `events?run=${oldRun}&after=1`)
  await waitFor('new run replay', () => resumed.events.length >= 2)
  assert.equal(resumed.events[0]?.id, `${newRun}:1`)
  const trace = await (await fetch(`${rt.url}artifacts/trace.jsonl`)).text()
  assert.equal(trace.trimEnd().split('\n').length, 2, 'the new run has a fresh trace')
})

test('closeTrace without done ends streams with event: closed; later streams replay then close', async (t) => {
  const rt = await startRuntime(t)
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('info', () => stream.events.length >= 1)
  rt.closeTrace()
  await waitFor('stream end', () => stream.ended)
  assert.equal(stream.endedBy, 'end')
  assert.ok(stream.raw.endsWith('event: closed\ndata: {}\n\n'))
  assert.equal(stream.events.at(-1)?.event, 'closed')
  assert.equal(rt.openEventStreams, 0)
  assert.throws(() => rt.emit('log', {}), /ended/)

  const later = await openStream(t, rt.url, 'events')
  await waitFor('later stream end', () => later.ended)
  assert.deepEqual(
    later.events.map((e) => e.event),
    ['info', 'closed'],
  )
  rt.newRun()
  const fresh = await openStream(t, rt.url, 'events')
  await waitFor('new run info', () => fresh.events.length >= 1)
  // The sentinel: a `closed` of the old run would have come (and ended the stream) before this live event.
  const live = rt.emit('log', { msg: 'sentinel' })
  await waitFor('the sentinel', () => fresh.events.some((e) => e.data === live.line))
  assert.deepEqual(
    fresh.events.map((e) => e.event),
    ['info', 'log'],
  )
  assert.equal(fresh.ended, false)
})

test('dropStreams destroys sockets; openEventStreams and eventConnections count', async (t) => {
  const rt = await startRuntime(t)
  assert.equal(rt.eventConnections, 0)
  const a = await openStream(t, rt.url, 'events')
  const b = await openStream(t, rt.url, 'events')
  await waitFor('two open streams', () => rt.openEventStreams === 2)
  assert.equal(rt.eventConnections, 2)
  rt.dropStreams()
  await waitFor('both dropped', () => a.ended && b.ended)
  assert.equal(a.endedBy, 'aborted')
  assert.equal(b.endedBy, 'aborted')
  assert.ok(!a.raw.includes('closed'))
  assert.equal(rt.openEventStreams, 0)
  const c = await openStream(t, rt.url, 'events')
  await waitFor('reconnect', () => rt.openEventStreams === 1 && c.events.length >= 1)
  assert.equal(rt.eventConnections, 3)
  c.close()
  await waitFor('client close is noticed', () => rt.openEventStreams === 0)
})

test('a stall silences the streams open now (no events, no pings) until lifted', async (t) => {
  const rt = await startRuntime(t, { pingIntervalMs: 30 })
  const stalled = await openStream(t, rt.url, 'events')
  await waitFor('info and a ping', () => stalled.events.length >= 1 && stalled.comments.includes('ping'))
  rt.stallStreams(true)
  // The witness: a stream opened during the stall flows, and is written in the same turns as the stalled one.
  // What was in flight to the stalled stream landed before the witness's own round trip completed.
  const reconnect = await openStream(t, rt.url, `events?run=${rt.run}&after=1`)
  await waitFor('the witness is open', () => reconnect.comments.length >= 1)
  const before = stalled.raw.length
  const during = rt.emit('log', { msg: 'during the stall' })
  // The sentinels: the event and two pings after it reached the witness, so they were sent to every stream.
  await waitFor('the event and two pings on the witness', () => {
    const at = reconnect.raw.indexOf(during.line)
    return at >= 0 && reconnect.raw.slice(at).split(': ping').length > 2
  })
  assert.equal(stalled.raw.length, before, 'nothing at all reached the stalled stream')
  assert.equal(stalled.ended, false)
  const trace = await (await fetch(`${rt.url}artifacts/trace.jsonl`)).text()
  assert.ok(trace.includes(during.line), 'the event is in the trace')

  rt.stallStreams(false)
  await waitFor('the stalled stream catches up', () => stalled.events.some((e) => e.data === during.line))
  await waitFor('pings again', () => stalled.raw.slice(before).includes(': ping'))
})

test('setDown answers every route with the status and a JSON body', async (t) => {
  const rt = await startRuntime(t)
  rt.setDown(502)
  for (const path of ['events', 'inbox', 'artifacts/trace.jsonl', 'nope']) {
    const res = await fetch(`${rt.url}${path}`)
    assert.equal(res.status, 502, path)
    assert.match(res.headers.get('content-type') ?? '', /application\/json/)
    assert.equal(((await res.json()) as { error: string }).error, 'runtime_unavailable')
  }
  const post = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'k', text: 'x' },
  })
  assert.equal(post.status, 502)
  rt.setDown(null)
  assert.equal((await fetch(`${rt.url}inbox`)).status, 200)
  assert.deepEqual((await call(rt.url, 'GET', 'messages')).body.messages, [])
})

test('setHang accepts requests and never answers them', async (t) => {
  const rt = await startRuntime(t)
  rt.setHang(true)
  await assert.rejects(fetch(`${rt.url}inbox`, { signal: AbortSignal.timeout(300) }), {
    name: 'TimeoutError',
  })
  assert.equal(rt.received.at(-1)?.url, '/inbox')
  rt.setHang(false)
  assert.equal((await fetch(`${rt.url}inbox`)).status, 200)
})

test('received records method, url, headers and body bytes of every request', async (t) => {
  const rt = await startRuntime(t)
  const body = JSON.stringify({ run: rt.run, key: 'k1', text: 'hello' })
  await call(rt.url, 'POST', 'messages', { token: MESSAGING, body: JSON.parse(body) })
  // A chunked body with no content-length is counted too.
  await new Promise<void>((resolve, reject) => {
    const req = request(new URL('messages', rt.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', [TOKEN_HEADER]: SESSION },
    })
    req.on('response', (res) => {
      res.resume()
      res.on('end', resolve)
    })
    req.on('error', reject)
    req.write('{"run":')
    req.end(`${JSON.stringify(rt.run)},"key":"k2","text":"chunked"}`)
  })
  const [first, second] = rt.received
  assert.equal(first?.method, 'POST')
  assert.equal(first?.url, '/messages')
  assert.equal(first?.headers[TOKEN_HEADER], MESSAGING)
  assert.equal(first?.bodyBytes, Buffer.byteLength(body))
  assert.equal(second?.headers['transfer-encoding'], 'chunked')
  assert.equal(
    second?.bodyBytes,
    Buffer.byteLength(`{"run":${JSON.stringify(rt.run)},"key":"k2","text":"chunked"}`),
  )
})

test('an EventSource client resumes with Last-Event-ID after a drop, without duplicates', async (t) => {
  const rt = await startRuntime(t)
  const source = new EventSource(`${rt.url}events`)
  t.after(() => source.close())
  const seen: string[] = []
  for (const type of ['info', 'log']) source.addEventListener(type, (event) => seen.push(event.lastEventId))
  rt.emit('log', { msg: 'one' })
  await waitFor('two events', () => seen.length >= 2)
  rt.dropStreams()
  rt.emit('log', { msg: 'missed while down' })
  await waitFor('reconnect and catch up', () => seen.length >= 3)
  rt.emit('log', { msg: 'live again' })
  await waitFor('the live one', () => seen.length >= 4)
  assert.deepEqual(
    seen,
    [1, 2, 3, 4].map((seq) => `${rt.run}:${seq}`),
  )
  const resumedWith = rt.received.filter((r) => r.url === '/events').map((r) => r.headers['last-event-id'])
  assert.deepEqual(resumedWith, [undefined, `${rt.run}:2`])
})

test('close() ends open streams and held requests and frees the port', async (t) => {
  const rt = await startRuntime(t)
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('open', () => stream.events.length >= 1)
  rt.setHang(true)
  const held = fetch(`${rt.url}inbox`).then(
    () => 'answered',
    () => 'failed',
  )
  await waitFor('the held request', () => rt.received.some((r) => r.url === '/inbox'))
  const started = Date.now()
  await rt.close()
  // Neither the open stream nor the held request holds it up (either would until the test's timeout); the
  // bound is for a loaded machine.
  assert.ok(Date.now() - started < 30_000)
  await waitFor('stream ended', () => stream.ended)
  assert.equal(await held, 'failed')
  await assert.rejects(fetch(`${rt.url}inbox`))
  await rt.close() // idempotent
})
