import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { addRuntime, call, fastEnv } from '../overview/helpers.ts'

test('who sent each message and who took each action in a run: names and times by key, what a reader may know', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const carol = await bearer({ sub: 'carol', name: 'Carol', roles: ['operator'], teams: ['blue'] })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const vic = await bearer({ sub: 'vic', name: 'Vic', roles: ['viewer'], teams: ['blue'] })
  const base = `${gw.url}/desktop/k1/mcp/`
  const activity = (who = vic, query = `?run=${encodeURIComponent(rt.run)}`) =>
    call(`${gw.url}/api/sessions/k1/activity${query}`, 'GET', who)

  assert.deepEqual((await activity()).body, { messages: [], actions: [] })
  const { request_id } = rt.ask({ title: 'Pick', fields: [{ id: 'n', type: 'integer', required: true }] })
  assert.equal(
    (await call(`${base}messages`, 'POST', dan, { run: rt.run, key: 'd1', text: 'hi' })).status,
    202,
  )
  // A retry under the same key is the same message: Dan's, once.
  assert.equal(
    (await call(`${base}messages`, 'POST', dan, { run: rt.run, key: 'd1', text: 'hi' })).status,
    200,
  )
  const reply = { run: rt.run, key: 'c1', reply_to: request_id, revision: 1, values: { n: 4 } }
  assert.equal((await call(`${base}messages`, 'POST', carol, reply)).status, 202)
  // Refused writes are nobody's message.
  const late = { ...reply, key: 'd2', values: { n: 5 } }
  assert.equal((await call(`${base}messages`, 'POST', dan, late)).status, 409)
  assert.equal(
    (await call(`${base}actions`, 'POST', carol, { run: rt.run, key: 's1', action: 'stop' })).status,
    202,
  )

  const seen = await activity()
  assert.equal(seen.status, 200)
  const body = seen.body as {
    messages: { key: string; name: string; at: string }[]
    actions: { key: string; action: string; name: string; at: string }[]
  }
  assert.deepEqual(
    body.messages.map((m) => [m.key, m.name]),
    [
      ['d1', 'Dan'],
      ['c1', 'Carol'],
    ],
  )
  assert.deepEqual(
    body.actions.map((a) => [a.key, a.action, a.name]),
    [['s1', 'stop', 'Carol']],
  )
  for (const item of [...body.messages, ...body.actions]) {
    assert.ok(!Number.isNaN(Date.parse(item.at)), 'a time')
    assert.deepEqual(
      Object.keys(item).sort(),
      'action' in item ? ['action', 'at', 'key', 'name'] : ['at', 'key', 'name'],
      'names and times only: no address, status, sub or value',
    )
  }
  assert.ok(!JSON.stringify(body).includes('hi'), 'no text')

  // Another run, another session's team, no run, a run id that is not one.
  assert.deepEqual((await activity(vic, '?run=run-other')).body, { messages: [], actions: [] })
  const red = await bearer({ sub: 'rex', roles: ['viewer'], teams: ['red'] })
  assert.equal((await activity(red)).status, 404, 'a session the caller may not see is unknown')
  assert.equal((await activity(vic, '')).status, 400)
  assert.equal((await activity(vic, '?run=%20')).status, 400)
  assert.equal((await call(`${gw.url}/api/sessions/k1/activity?run=${rt.run}`, 'GET', '')).status, 401)
})
