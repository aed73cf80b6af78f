import assert from 'node:assert/strict'
import { test } from 'node:test'
import { call, frames, MESSAGING, openStream, SESSION, startRuntime, waitFor } from './helpers.ts'

type Json = Record<string, unknown>

test('a message moves pending → queued → dispatched → responded under the loop consumer', async (t) => {
  const rt = await startRuntime(t)
  const stream = await openStream(t, rt.url, 'events')
  const sent = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'k1', text: 'use the staging account' },
  })
  assert.equal(sent.status, 202)
  assert.equal(sent.body.state, 'pending')
  assert.equal(sent.body.sender, 'operator')
  assert.equal(sent.body.rev, 1)
  const id = sent.body.id as string
  await waitFor(
    'responded',
    async () => (await call(rt.url, 'GET', `messages/${id}`)).body.state === 'responded',
  )
  await waitFor('the delivery events', () => frames(stream).filter((f) => f.event === 'delivery').length >= 3)
  const inbox = frames(stream).filter((f) => ['message', 'delivery', 'step'].includes(f.event ?? ''))
  assert.deepEqual(
    inbox.map((f) => [f.event, ((f.data.message ?? {}) as Json).state ?? (f.data.step as Json).action]),
    [
      ['message', 'pending'],
      ['delivery', 'queued'],
      ['step', `message:${id}`],
      ['delivery', 'dispatched'],
      ['delivery', 'responded'],
    ],
  )
  const revs = inbox.filter((f) => f.event !== 'step').map((f) => (f.data.message as Json).rev)
  assert.deepEqual(revs, [1, 2, 3, 4])

  const state = await call(rt.url, 'GET', 'inbox')
  assert.deepEqual(state.body, {
    run: rt.run,
    epoch: rt.epoch,
    consumer: 'loop',
    rev: 4,
    counts: { pending: 0, queued: 0, responded: 1 },
  })
  const since = await call(rt.url, 'GET', 'messages?since=3')
  assert.deepEqual(
    (since.body.messages as Json[]).map((m) => m.id),
    [id],
    'a state change re-lists a message',
  )
  assert.deepEqual((await call(rt.url, 'GET', 'messages?since=4')).body.messages, [])
  assert.equal((await call(rt.url, 'GET', 'messages?since=x')).status, 400)
  assert.equal((await call(rt.url, 'GET', 'messages/m999')).status, 404)
})

test('state= is a snapshot by state; messages wait as pending while the loop is idle', async (t) => {
  const rt = await startRuntime(t)
  rt.setLoop('idle')
  const a = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'a', text: 'one' },
  })
  const b = await call(rt.url, 'POST', 'messages', {
    token: SESSION,
    body: { run: rt.run, key: 'b', text: 'two' },
  })
  assert.equal(b.body.sender, 'orchestrator')
  const pending = await call(rt.url, 'GET', 'messages?state=pending,queued')
  assert.deepEqual(
    (pending.body.messages as Json[]).map((m) => m.id),
    [a.body.id, b.body.id],
  )
  assert.deepEqual((await call(rt.url, 'GET', 'messages?state=responded')).body.messages, [])
  assert.equal((await call(rt.url, 'GET', 'messages?state=bogus')).status, 400)
  assert.deepEqual((await call(rt.url, 'GET', 'inbox')).body.counts, { pending: 2, queued: 0 })
  rt.setLoop('running')
  await waitFor(
    'both responded',
    async () => ((await call(rt.url, 'GET', 'inbox')).body.counts as Json).responded === 2,
  )
})

test('idempotency by (run, sender, key): same content 200, different 409', async (t) => {
  const rt = await startRuntime(t)
  rt.setLoop('idle')
  const body = { run: rt.run, key: 'same', text: 'hello', attachments: [] }
  const first = await call(rt.url, 'POST', 'messages', { token: MESSAGING, body })
  assert.equal(first.status, 202)
  const again = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { text: 'hello', attachments: [], key: 'same', run: rt.run },
  })
  assert.equal(again.status, 200)
  assert.deepEqual(again.body, first.body)
  const changed = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { ...body, text: 'other' },
  })
  assert.equal(changed.status, 409)
  assert.equal(changed.body.error, 'key_conflict')
  const otherSender = await call(rt.url, 'POST', 'messages', { token: SESSION, body })
  assert.equal(otherSender.status, 202, 'keys are per sender')
  assert.notEqual(otherSender.body.id, first.body.id)
  assert.equal((await call(rt.url, 'GET', 'messages')).body.rev, 2)
})

test('message refusals: wrong run 409 with run and epoch, sender/unknown field 400, long text 413', async (t) => {
  const rt = await startRuntime(t, { inboxMessageChars: 10 })
  const post = (body: unknown) => call(rt.url, 'POST', 'messages', { token: MESSAGING, body })

  const wrongRun = await post({ run: 'run-old', key: 'k', text: 'hi' })
  assert.equal(wrongRun.status, 409)
  assert.equal(wrongRun.body.run, rt.run)
  assert.equal(wrongRun.body.epoch, rt.epoch)
  assert.equal(typeof wrongRun.body.error, 'string')
  const wrongEpoch = await post({ run: rt.run, epoch: 'ep-other', key: 'k', text: 'hi' })
  assert.equal(wrongEpoch.status, 409)
  assert.equal((await post({ run: rt.run, epoch: rt.epoch, key: 'k0', text: 'hi' })).status, 202)

  const withSender = await post({ run: rt.run, key: 'k', text: 'hi', sender: 'operator' })
  assert.equal(withSender.status, 400)
  assert.equal(withSender.body.error, 'sender_not_allowed')
  const unknown = await post({ run: rt.run, key: 'k', text: 'hi', priority: 'high' })
  assert.equal(unknown.status, 400)
  assert.deepEqual(unknown.body.unknown, ['priority'])
  assert.equal((await post({ key: 'k', text: 'hi' })).status, 400, 'run is required')
  assert.equal((await post({ run: rt.run, text: 'hi' })).status, 400, 'key is required')
  assert.equal((await post({ run: rt.run, key: 'k', text: 42 })).status, 400)
  assert.equal((await post({ run: rt.run, key: 'k', text: '  ' })).status, 400, 'an empty message')
  assert.equal(
    (await post({ run: rt.run, key: 'k', text: 'hi', values: { a: 1 } })).status,
    400,
    'values need reply_to',
  )
  assert.equal((await post([1, 2])).status, 400)

  const long = await post({ run: rt.run, key: 'k', text: '12345678901' })
  assert.equal(long.status, 413)
  assert.equal((await post({ run: rt.run, key: 'k', text: '1234567890' })).status, 202, 'exactly the limit')
  assert.equal(
    (await post({ run: rt.run, key: 'k2', text: '😀😀😀😀😀😀😀😀😀😀' })).status,
    202,
    'characters, not UTF-16 units',
  )

  const missing = await post({ run: rt.run, key: 'k3', text: 'see file', attachments: ['att_nope'] })
  assert.equal(missing.status, 400)
  assert.equal(missing.body.error, 'unknown_attachment')

  const badJson = await fetch(`${rt.url}messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-kasm-runtime-session-token': MESSAGING },
    body: '{"run":',
  })
  assert.equal(badJson.status, 400)
})

test('runs/<run>/messages/<key> outlives the run; a new run marks pending messages undelivered', async (t) => {
  const rt = await startRuntime(t)
  rt.setLoop('idle')
  const oldRun = rt.run
  const sent = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: oldRun, key: 'lost', text: 'x' },
  })
  const stream = await openStream(t, rt.url, 'events')
  await waitFor('replay', () => stream.events.length >= 2)
  rt.newRun()
  await waitFor('the undelivered delivery', () =>
    frames(stream).some((f) => f.event === 'delivery' && (f.data.message as Json).state === 'undelivered'),
  )
  const delivery = frames(stream).find((f) => f.event === 'delivery')
  assert.equal(
    delivery?.id?.startsWith(`${oldRun}:`),
    true,
    'emitted in the old run before the new one starts',
  )

  const record = await call(rt.url, 'GET', `runs/${oldRun}/messages/lost`, { token: MESSAGING })
  assert.equal(record.status, 200)
  assert.equal(record.body.id, sent.body.id)
  assert.equal(record.body.state, 'undelivered')
  assert.equal(typeof record.body.undelivered_reason, 'string')
  assert.equal(
    (await call(rt.url, 'GET', `runs/${oldRun}/messages/lost`, { token: SESSION })).status,
    404,
    'per sender',
  )
  assert.equal((await call(rt.url, 'GET', `runs/${oldRun}/messages/never`, { token: MESSAGING })).status, 404)
  assert.equal((await call(rt.url, 'GET', `runs/${rt.run}/messages/lost`, { token: MESSAGING })).status, 404)

  const retry = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: oldRun, key: 'lost', text: 'x' },
  })
  assert.equal(retry.status, 409, 'the session moved on')
  assert.equal(retry.body.run, rt.run)
  const inbox = await call(rt.url, 'GET', 'inbox')
  assert.equal(inbox.body.rev, 0)
  assert.deepEqual((await call(rt.url, 'GET', 'messages')).body.messages, [])
})

const FIELDS = [
  { id: 'name', type: 'string', required: true, max_length: 5, pattern: '^[a-z]+$' },
  { id: 'browser', type: 'string', enum: ['chrome', 'firefox'] },
  { id: 'count', type: 'integer', minimum: 1, maximum: 3 },
  { id: 'ratio', type: 'number', minimum: 0, maximum: 1 },
  { id: 'ok', type: 'boolean' },
  { id: 'tags', type: 'string[]', enum: ['a', 'b', 'c'], min_items: 1, max_items: 2 },
  { id: 'file', type: 'attachment', accept: ['image/*'], max_bytes: 10 },
]

test('replies are validated against typed fields (422 leaves the request open); one valid reply closes it', async (t) => {
  const rt = await startRuntime(t)
  const stream = await openStream(t, rt.url, 'events')
  const { request_id, revision } = rt.ask({ title: 'Details?', help: 'for the form', fields: FIELDS })
  assert.equal(revision, 1)
  const reply = (key: string, values: Json, extra: Json = {}) =>
    call(rt.url, 'POST', 'messages', {
      token: MESSAGING,
      body: { run: rt.run, key, reply_to: request_id, revision, values, ...extra },
    })
  const upload = async (bytes: number, type: string) => {
    const form = new FormData()
    form.append('file', new Blob([Buffer.alloc(bytes, 1)], { type }), 'f')
    const res = await fetch(`${rt.url}attachments`, {
      method: 'POST',
      headers: { 'x-kasm-runtime-session-token': MESSAGING },
      body: form,
    })
    return ((await res.json()) as { id: string }).id
  }
  const bigImage = await upload(11, 'image/png')
  const text = await upload(5, 'text/plain')
  const smallImage = await upload(5, 'image/png')

  const cases: Array<[Json, string]> = [
    [{}, 'name'],
    [{ name: '' }, 'name'],
    [{ name: 'abcdef' }, 'name'],
    [{ name: 'ABC' }, 'name'],
    [{ name: 7 }, 'name'],
    [{ name: 'ab', browser: 'safari' }, 'browser'],
    [{ name: 'ab', count: 4 }, 'count'],
    [{ name: 'ab', count: 0 }, 'count'],
    [{ name: 'ab', count: 1.5 }, 'count'],
    [{ name: 'ab', ratio: 1.01 }, 'ratio'],
    [{ name: 'ab', ratio: '0.5' }, 'ratio'],
    [{ name: 'ab', ok: 'yes' }, 'ok'],
    [{ name: 'ab', tags: ['d'] }, 'tags'],
    [{ name: 'ab', tags: [] }, 'tags'],
    [{ name: 'ab', tags: ['a', 'b', 'c'] }, 'tags'],
    [{ name: 'ab', tags: 'a' }, 'tags'],
    [{ name: 'ab', file: 'att_missing' }, 'file'],
    [{ name: 'ab', file: bigImage }, 'file'],
    [{ name: 'ab', file: text }, 'file'],
    [{ name: 'ab', extra: 1 }, 'extra'],
  ]
  for (const [i, [values, field]] of cases.entries()) {
    const res = await reply(`bad-${i}`, values)
    assert.equal(res.status, 422, JSON.stringify(values))
    assert.deepEqual(
      (res.body.fields as Json[]).map((f) => f.field),
      [field],
      JSON.stringify(values),
    )
    assert.equal(typeof (res.body.fields as Json[])[0]?.error, 'string')
  }
  assert.deepEqual(
    ((await call(rt.url, 'GET', 'requests?state=open')).body.requests as Json[]).map((r) => r.request_id),
    [request_id],
  )
  assert.equal(
    (await call(rt.url, 'GET', `requests/${request_id}`)).body.state,
    'open',
    'still open after 422s',
  )
  assert.equal((await reply('stale', { name: 'ab' }, { revision: 2 })).status, 409)
  assert.equal((await reply('no-rev', { name: 'ab' }, { revision: undefined })).status, 400)

  const values = {
    name: 'ab',
    browser: 'firefox',
    count: 3,
    ratio: 0.5,
    ok: false,
    tags: ['a', 'c'],
    file: smallImage,
  }
  const good = await reply('good', values)
  assert.equal(good.status, 202)
  assert.deepEqual(good.body.values, values)
  const closed = await call(rt.url, 'GET', `requests/${request_id}`)
  assert.equal(closed.body.state, 'closed')
  assert.equal(closed.body.closed_by, 'reply')
  assert.equal(closed.body.reply_id, good.body.id)
  assert.deepEqual((await call(rt.url, 'GET', 'requests?state=open')).body.requests, [])
  assert.equal((await reply('good', values)).status, 200, 'a retried reply returns the stored one')
  const second = await reply('second', values)
  assert.equal(second.status, 409)
  assert.equal(second.body.error, 'request_closed')
  assert.equal(
    ((await call(rt.url, 'GET', 'messages')).body.messages as Json[]).filter((m) => m.reply_to === request_id)
      .length,
    1,
    'refused replies are not stored',
  )
  const unknown = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'u', reply_to: 'q99', revision: 1, values: {} },
  })
  assert.equal(unknown.status, 409)

  await waitFor('request events', () => frames(stream).filter((f) => f.event === 'request').length >= 2)
  const requestEvents = frames(stream)
    .filter((f) => f.event === 'request')
    .map((f) => f.data.request as Json)
  assert.deepEqual(
    requestEvents.map((r) => r.state),
    ['open', 'closed'],
  )
  assert.equal(requestEvents[0]?.schema_version, 1)
  assert.equal(requestEvents[0]?.run, rt.run)
  assert.equal(typeof requestEvents[0]?.deadline, 'string')
  const askStep = frames(stream).find((f) => f.event === 'step')?.data.step as Json
  assert.equal(askStep.action, 'tool:ask_human("Details?")')
  const order = frames(stream).map((f) => f.event)
  assert.ok(order.lastIndexOf('message') < order.lastIndexOf('request'), 'the reply, then the closing')
})

test('POST /requests (session token), GET requests, cancel and deadline', async (t) => {
  const rt = await startRuntime(t)
  const post = (body: unknown, token = SESSION) => call(rt.url, 'POST', 'requests', { token, body })
  const created = await post({
    title: 'Pick one',
    fields: [{ id: 'x', type: 'string', enum: ['a', 'b'], required: true, label: 'X', hint: 'radio' }],
  })
  assert.equal(created.status, 201)
  assert.equal(created.body.asked_by, 'orchestrator')
  assert.deepEqual(
    Object.keys(created.body).filter((k) =>
      ['run', 'request_id', 'schema_version', 'revision', 'title', 'fields', 'deadline', 'state'].includes(k),
    ).length,
    8,
  )
  assert.equal((await post({ title: 'x', fields: [] }, MESSAGING)).status, 403)
  assert.equal((await post({ fields: [] })).status, 400)
  assert.equal((await post({ title: 't', fields: 'x' })).status, 400)
  assert.equal((await post({ title: 't', fields: [{ id: 'a', type: 'string' }], deadline: 5 })).status, 400)
  assert.equal((await post({ title: 't', fields: [{ id: 'a', type: 'string' }], sender: 'me' })).status, 400)
  const invalid = await post({
    title: 't',
    fields: [
      { id: 'a', type: 'date' },
      { id: 'b', type: 'integer', minimum: 5, maximum: 1 },
      { id: 'c', type: 'string[]' },
      { id: 'd', type: 'string', pattern: '(' },
      { id: 'd', type: 'boolean' },
      { id: 'e', type: 'boolean', max_length: 3 },
      { id: 'f', type: 'attachment', accept: ['not a mime'] },
    ],
  })
  assert.equal(invalid.status, 422)
  assert.deepEqual(
    (invalid.body.fields as Json[]).map((f) => f.field),
    ['a', 'b', 'c', 'd', 'd', 'e', 'f'],
  )
  const id = created.body.request_id as string
  assert.deepEqual(
    ((await call(rt.url, 'GET', 'requests?state=open')).body.requests as Json[]).map((r) => r.request_id),
    [id],
  )
  assert.deepEqual((await call(rt.url, 'GET', 'inbox')).body.open_requests, [id])
  assert.equal((await call(rt.url, 'GET', 'requests?state=nope')).status, 400)
  assert.equal((await call(rt.url, 'POST', `requests/${id}/cancel`, { token: MESSAGING })).status, 403)
  const cancelled = await call(rt.url, 'POST', `requests/${id}/cancel`, { token: SESSION })
  assert.equal(cancelled.status, 200)
  assert.equal(cancelled.body.closed_by, 'cancelled')
  assert.equal((await call(rt.url, 'POST', `requests/${id}/cancel`, { token: SESSION })).status, 409)
  assert.equal((await call(rt.url, 'POST', 'requests/q404/cancel', { token: SESSION })).status, 404)
  assert.equal((await call(rt.url, 'GET', 'requests/q404')).status, 404)
  assert.equal((await call(rt.url, 'GET', 'inbox')).body.open_requests, undefined)

  const quick = rt.ask({ title: 'Fast?', fields: [{ id: 'y', type: 'boolean' }], deadlineS: 0.1 })
  await waitFor(
    'timeout',
    async () => (await call(rt.url, 'GET', `requests/${quick.request_id}`)).body.closed_by === 'timeout',
  )
  assert.throws(() => rt.ask({ title: 'bad', fields: [{ id: 'z', type: 'nope' }] }), /not valid/)

  const open = rt.ask({ title: 'Left open', fields: [{ id: 'y', type: 'boolean' }] })
  rt.closeTrace({ done: true })
  assert.equal((await call(rt.url, 'GET', `requests/${open.request_id}`)).body.closed_by, 'run_ended')
  assert.equal((await post({ title: 'late', fields: [{ id: 'a', type: 'string' }] })).status, 409)
})

test('stop: accepted while running, stopped once the loop exits; refused (and recorded) otherwise', async (t) => {
  // A stop waits two delivery steps for the tool in flight: wide enough for the checks made meanwhile.
  const rt = await startRuntime(t, { deliveryStepMs: 1000 })
  const stream = await openStream(t, rt.url, 'events')
  const act = (key: string, action: string, token = MESSAGING, args?: Json) =>
    call(rt.url, 'POST', 'actions', { token, body: { run: rt.run, key, action, ...(args ? { args } : {}) } })

  const handoff = await act('h0', 'finish_handoff')
  assert.equal(handoff.status, 409)
  assert.equal(handoff.body.state, 'running')

  const stop = await act('s1', 'stop')
  assert.equal(stop.status, 202)
  assert.equal(stop.body.state, 'accepted')
  const stopping = await call(rt.url, 'GET', 'inbox')
  assert.equal(stopping.body.stopping, true)
  assert.equal(typeof stopping.body.stopping_tool, 'string')
  assert.equal((await act('s1', 'stop')).status, 200, 'a retry with the same key')
  assert.equal((await act('s1', 'finish_handoff')).status, 409, 'the same key for another action')
  const during = await act('s2', 'stop')
  assert.equal(during.status, 409)
  assert.equal(during.body.state, 'stopping')
  await waitFor('stopped', () =>
    frames(stream).some((f) => f.event === 'action' && (f.data.action as Json).state === 'stopped'),
  )
  const inbox = await call(rt.url, 'GET', 'inbox')
  assert.equal(inbox.body.stopping, undefined)
  const again = await act('s3', 'stop')
  assert.equal(again.status, 409)
  assert.equal(again.body.state, 'idle')
  const actions = frames(stream)
    .filter((f) => f.event === 'action')
    .map((f) => [
      (f.data.action as Json).action,
      (f.data.action as Json).state,
      (f.data.action as Json).found,
    ])
  assert.deepEqual(actions, [
    ['finish_handoff', 'refused', 'running'],
    ['stop', 'accepted', undefined],
    ['stop', 'refused', 'stopping'],
    ['stop', 'stopped', undefined],
    ['stop', 'refused', 'idle'],
  ])
  const late = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'late', text: 'hello?' },
  })
  assert.equal(late.body.state, 'undelivered', 'the loop has stopped')

  assert.equal((await act('x', 'reboot')).status, 400)
  const badArgs = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 'y', action: 'stop', args: 'nope' },
  })
  assert.equal(badArgs.status, 400)
  assert.equal(badArgs.body.error, 'invalid_args')
  const sender = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 'y', action: 'stop', sender: 'x' },
  })
  assert.equal(sender.status, 400)
  const wrongRun = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: 'old', key: 'z', action: 'stop' },
  })
  assert.equal(wrongRun.status, 409)
  assert.equal(wrongRun.body.run, rt.run)
})

test('finish_handoff during an escalation; ack only for an external consumer with the session token', async (t) => {
  const rt = await startRuntime(t)
  const stream = await openStream(t, rt.url, 'events')
  const act = (key: string, action: string, token = MESSAGING, args?: Json) =>
    call(rt.url, 'POST', 'actions', { token, body: { run: rt.run, key, action, ...(args ? { args } : {}) } })
  rt.setLoop('escalation')
  assert.equal((await act('s', 'stop')).body.state, 'escalation')
  const finish = await act('f', 'finish_handoff', SESSION)
  assert.equal(finish.status, 202)
  await waitFor('escalation event', () => frames(stream).some((f) => f.event === 'escalation'))
  assert.equal(
    (frames(stream).find((f) => f.event === 'escalation')?.data.escalation as Json | undefined)?.ended_by,
    'operator',
  )
  assert.equal((await act('f2', 'finish_handoff')).body.state, 'idle')

  const m = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'm', text: 'hi' },
  })
  const ids = [m.body.id]
  assert.equal((await act('a1', 'ack', MESSAGING, { ids, state: 'queued' })).status, 403)
  const inLoop = await act('a2', 'ack', SESSION, { ids, state: 'queued' })
  assert.equal(inLoop.status, 409, "the runtime's own loop consumes the messages")
  assert.equal(inLoop.body.state, 'loop')
})

test('external consumer: messages stay pending until ack moves them forward', async (t) => {
  const rt = await startRuntime(t, { consumer: 'external' })
  const stream = await openStream(t, rt.url, 'events')
  assert.equal((await call(rt.url, 'GET', 'inbox')).body.consumer, 'external')
  const info = frames(await waitFor('info', () => (stream.events.length > 0 ? stream : null)))[0]?.data
    .info as Json
  assert.equal(info.mode, 'mcp')
  const m = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'k', text: 'hi' },
  })
  const id = m.body.id as string
  // A window for what must not happen: the runtime's own loop would have read it in its first 20 ms delivery
  // step. On a loaded machine the window holds fewer steps: the check gets weaker, it never fails wrongly.
  await new Promise((resolve) => setTimeout(resolve, 150))
  assert.equal((await call(rt.url, 'GET', `messages/${id}`)).body.state, 'pending', 'no loop reads it')
  const act = (key: string, args: Json, token = SESSION) =>
    call(rt.url, 'POST', 'actions', { token, body: { run: rt.run, key, action: 'ack', args } })
  assert.equal((await act('a0', { ids: [id], state: 'queued' }, MESSAGING)).status, 403)
  assert.equal((await act('a1', { ids: ['m999'], state: 'queued' })).status, 400)
  assert.equal((await act('a2', { ids: [id], state: 'read' })).status, 400)
  assert.equal((await act('a3', { ids: [], state: 'queued' })).status, 400)
  assert.equal((await act('a4', { ids: [id], state: 'responded', detail: 'answered' })).status, 202)
  const record = (await call(rt.url, 'GET', `messages/${id}`)).body
  assert.equal(record.state, 'responded')
  assert.equal(record.detail, 'answered')
  assert.equal((await act('a5', { ids: [id], state: 'queued' })).status, 202)
  assert.equal((await call(rt.url, 'GET', `messages/${id}`)).body.state, 'responded', 'never backwards')
  const deliveries = frames(stream)
    .filter((f) => f.event === 'delivery')
    .map((f) => (f.data.message as Json).state)
  assert.deepEqual(deliveries, ['responded'])
  const stop = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 's', action: 'stop' },
  })
  assert.equal(stop.status, 409, 'no agentic loop runs in mcp mode')
  assert.equal(stop.body.state, 'idle')
})

test('GET /inbox leaves out empty and false fields; a closed inbox stores late messages as undelivered', async (t) => {
  const rt = await startRuntime(t)
  assert.deepEqual(Object.keys((await call(rt.url, 'GET', 'inbox')).body).sort(), [
    'consumer',
    'counts',
    'epoch',
    'rev',
    'run',
  ])
  rt.closeTrace()
  const closed = await call(rt.url, 'GET', 'inbox')
  assert.equal(closed.body.closed, true)
  const late = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'k', text: 'too late' },
  })
  assert.equal(late.status, 202)
  assert.equal(late.body.state, 'undelivered')
  assert.equal(late.body.undelivered_reason, 'the run has ended')
  const stop = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 's', action: 'stop' },
  })
  assert.equal(stop.body.state, 'closed')
})

test('escalate: the model call, a status, the pause with its reason, ended by runner.escalation_pause_s', async (t) => {
  const rt = await startRuntime(t, { escalationPauseS: 0.2 })
  const stream = await openStream(t, rt.url, 'events')
  rt.escalate('a second factor is needed')
  const record = await waitFor('the pause to end by itself', () =>
    frames(stream).find((f) => f.event === 'escalation'),
  )
  const types = frames(stream).map((f) => f.event)
  assert.deepEqual(types.slice(-3), ['iteration', 'status', 'escalation'])
  const modelCall = frames(stream).find((f) => f.event === 'iteration')?.data.iteration as Json
  assert.deepEqual(modelCall.tool_calls, [
    { name: 'escalate', args: { reason: 'a second factor is needed' } },
  ])
  const escalation = record.data.escalation as Json
  assert.equal(escalation.ended_by, 'timeout')
  assert.equal(escalation.reason, 'a second factor is needed')
  const info = frames(stream)[0]?.data.info as { operator_config: { runner: Json } }
  assert.deepEqual(info.operator_config.runner, { ask_human_timeout_s: 300, escalation_pause_s: 0.2 })
  // The loop does not resume after a handoff.
  const act = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 'late', action: 'finish_handoff' },
  })
  assert.equal(act.body.state, 'idle')
})

test('a field type of a newer release is accepted by futureFieldTypes and checked only for presence', async (t) => {
  const rt = await startRuntime(t, { futureFieldTypes: ['date'] })
  assert.throws(() => rt.ask({ title: 'When?', fields: [{ id: 'd', type: 'datetime' }] }), /unsupported type/)
  const { request_id, revision } = rt.ask({
    title: 'When?',
    fields: [{ id: 'd', type: 'date', required: true, earliest: '2026-01-01' }],
  })
  const reply = (values: Json, key: string) =>
    call(rt.url, 'POST', 'messages', {
      token: MESSAGING,
      body: { run: rt.run, key, reply_to: request_id, revision, values },
    })
  const empty = await reply({}, 'r1')
  assert.equal(empty.status, 422)
  assert.deepEqual(empty.body.fields, [{ field: 'd', error: 'required' }])
  assert.equal((await reply({ d: '2026-03-01' }, 'r2')).status, 202)
})

test('a reply value that redaction would make invalid is refused with 422 at its field', async (t) => {
  const rt = await startRuntime(t, { redactPatterns: ['sk-[A-Za-z0-9]{8,}'] })
  const { request_id, revision } = rt.ask({
    title: 'Reference?',
    fields: [{ id: 'ref', type: 'string', pattern: '^[a-z0-9-]+$', required: true }],
  })
  const reply = (ref: string, key: string) =>
    call(rt.url, 'POST', 'messages', {
      token: MESSAGING,
      body: { run: rt.run, key, reply_to: request_id, revision, values: { ref } },
    })
  const refused = await reply('sk-abcdefgh1234', 'r1')
  assert.equal(refused.status, 422)
  assert.deepEqual(refused.body.fields, [{ field: 'ref', error: 'does not match ^[a-z0-9-]+$' }])
  assert.equal((await reply('ab-1234', 'r2')).status, 202)
})
