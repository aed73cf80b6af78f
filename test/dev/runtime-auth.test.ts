import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { call, MESSAGING, openStream, SESSION, startRuntime } from './helpers.ts'

const INBOX_ROUTES: Array<[string, string]> = [
  ['GET', 'inbox'],
  ['GET', 'messages'],
  ['GET', 'messages/m1'],
  ['POST', 'messages'],
  ['GET', 'requests'],
  ['GET', 'requests/q1'],
  ['POST', 'requests'],
  ['POST', 'requests/q1/cancel'],
  ['POST', 'actions'],
  ['POST', 'attachments'],
  ['GET', 'attachments/att_x'],
  ['GET', 'runs/r/messages/k'],
]

test('with neither token: observe reads are open, inbox routes are absent (404)', async (t) => {
  const rt = await startSimulatedRuntime()
  t.after(() => rt.close())
  const stream = await openStream(t, rt.url, 'events')
  assert.equal(stream.status, 200)
  assert.equal((await fetch(`${rt.url}artifacts/trace.jsonl`)).status, 200)
  for (const [method, path] of INBOX_ROUTES) {
    const res = await call(rt.url, method, path, {
      token: 'anything',
      body: method === 'POST' ? {} : undefined,
    })
    assert.equal(res.status, 404, `${method} ${path}`)
  }
})

test('with neither token and the observe token required: gated reads 503, inbox routes 404', async (t) => {
  const rt = await startSimulatedRuntime({ observeTokenRequired: true })
  t.after(() => rt.close())
  assert.equal((await call(rt.url, 'GET', 'events')).status, 503)
  assert.equal((await call(rt.url, 'GET', 'artifacts/trace.jsonl')).status, 503)
  assert.equal((await call(rt.url, 'GET', 'inbox')).status, 404)
})

test('observe token required: every GET needs the messaging or session token, header or ?token=', async (t) => {
  const rt = await startRuntime(t, { observeTokenRequired: true })
  for (const path of ['inbox', 'messages', 'requests', 'artifacts/trace.jsonl']) {
    const missing = await call(rt.url, 'GET', path)
    assert.equal(missing.status, 401, path)
    assert.equal(typeof missing.body.error, 'string')
    assert.equal((await call(rt.url, 'GET', path, { token: 'wrong' })).status, 401, path)
    assert.equal((await call(rt.url, 'GET', path, { token: MESSAGING })).status, 200, path)
    assert.equal((await call(rt.url, 'GET', path, { token: SESSION })).status, 200, path)
  }
  assert.equal((await call(rt.url, 'GET', 'events')).status, 401)
  const viaQuery = await openStream(t, rt.url, `events?token=${encodeURIComponent(MESSAGING)}`)
  assert.equal(viaQuery.status, 200)
  const viaHeader = await openStream(t, rt.url, 'events', { 'x-kasm-runtime-session-token': SESSION })
  assert.equal(viaHeader.status, 200)
  assert.equal((await call(rt.url, 'GET', `inbox?token=nope`)).status, 401)
})

test('observe reads are open by default; runs/<run>/messages/<key> always needs a token', async (t) => {
  const rt = await startRuntime(t)
  assert.equal((await call(rt.url, 'GET', 'inbox')).status, 200)
  assert.equal((await call(rt.url, 'GET', 'messages')).status, 200)
  assert.equal((await call(rt.url, 'GET', `runs/${rt.run}/messages/k`)).status, 401)
  assert.equal((await call(rt.url, 'GET', `runs/${rt.run}/messages/k`, { token: MESSAGING })).status, 404)
})

test('writes: 401 without or with a wrong token; the sender comes from the credential', async (t) => {
  const rt = await startRuntime(t)
  const body = (key: string) => ({ run: rt.run, key, text: 'hi' })
  assert.equal((await call(rt.url, 'POST', 'messages', { body: body('a') })).status, 401)
  assert.equal((await call(rt.url, 'POST', 'messages', { token: 'wrong', body: body('a') })).status, 401)
  assert.equal(
    (await call(rt.url, 'POST', 'messages', { token: MESSAGING, body: body('a') })).body.sender,
    'operator',
  )
  assert.equal(
    (await call(rt.url, 'POST', 'messages', { token: SESSION, body: body('a') })).body.sender,
    'orchestrator',
  )
  const viaQuery = await call(rt.url, 'POST', `messages?token=${encodeURIComponent(MESSAGING)}`, {
    body: body('q'),
  })
  assert.equal(viaQuery.status, 202)
  assert.equal(
    (await call(rt.url, 'POST', 'actions', { body: { run: rt.run, key: 's', action: 'stop' } })).status,
    401,
  )
})

test('session-token-only routes refuse the messaging token with 403', async (t) => {
  const rt = await startRuntime(t)
  const { request_id } = rt.ask({ title: 'q', fields: [{ id: 'a', type: 'boolean' }] })
  const fields = [{ id: 'a', type: 'boolean' }]
  assert.equal(
    (await call(rt.url, 'POST', 'requests', { token: MESSAGING, body: { title: 't', fields } })).status,
    403,
  )
  assert.equal(
    (await call(rt.url, 'POST', `requests/${request_id}/cancel`, { token: MESSAGING })).status,
    403,
  )
  const ack = { run: rt.run, key: 'k', action: 'ack', args: { ids: ['m1'], state: 'queued' } }
  assert.equal((await call(rt.url, 'POST', 'actions', { token: MESSAGING, body: ack })).status, 403)
  assert.equal(
    (await call(rt.url, 'POST', 'requests', { token: SESSION, body: { title: 't', fields } })).status,
    201,
  )
  assert.equal((await call(rt.url, 'POST', `requests/${request_id}/cancel`, { token: SESSION })).status, 200)
  assert.equal((await call(rt.url, 'POST', 'requests', { body: { title: 't', fields } })).status, 401)
})

test('a runtime with only the messaging token: session routes are 403 for it', async (t) => {
  const rt = await startSimulatedRuntime({ messagingToken: MESSAGING })
  t.after(() => rt.close())
  assert.equal(
    (await call(rt.url, 'POST', 'requests', { token: MESSAGING, body: { title: 't', fields: [] } })).status,
    403,
  )
  assert.equal(
    (await call(rt.url, 'POST', 'requests', { token: SESSION, body: { title: 't', fields: [] } })).status,
    401,
  )
})

test('rotateTokens: old tokens get 401 at once, new ones work', async (t) => {
  const rt = await startRuntime(t)
  rt.rotateTokens({ messagingToken: 'new-messaging' })
  const body = { run: rt.run, key: 'k', text: 'hi' }
  assert.equal((await call(rt.url, 'POST', 'messages', { token: MESSAGING, body })).status, 401)
  assert.equal((await call(rt.url, 'POST', 'messages', { token: 'new-messaging', body })).status, 202)
  assert.equal((await call(rt.url, 'POST', 'messages', { token: SESSION, body })).status, 202, 'untouched')
  rt.rotateTokens({ sessionToken: 'new-session' })
  assert.equal(
    (await call(rt.url, 'POST', 'messages', { token: SESSION, body: { ...body, key: 'k2' } })).status,
    401,
  )
})
