import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { openSse } from '../events/helpers.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { addRuntime, call, fastEnv, openOverview, TOKEN } from './helpers.ts'

test('one stream of every visible session: team filtering, live summaries, reader health, no text or values', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const blue = await addRuntime(t, gw, 'k-blue', 'blue')
  await addRuntime(t, gw, 'k-red', 'red')
  const alice = await bearer({ sub: 'alice', name: 'Alice', roles: ['operator'], teams: ['blue'] })

  const anonymous = await openSse(`${gw.url}/api/overview`)
  assert.equal(anonymous.status, 401)

  const overview = await openOverview(t, gw, alice)
  assert.equal(overview.sse.status, 200)
  assert.match(String(overview.sse.headers['content-type']), /text\/event-stream/)
  await waitFor('the first snapshot', () => overview.sse.events.some((e) => e.event === 'ready'))
  assert.deepEqual([...overview.entries().keys()], ['k-blue'], 'a session of another team is not shown')

  // Watching the overview keeps the session's upstream stream read, without any viewer socket.
  await overview.until('the blue runtime read live', (m) => m.get('k-blue')?.health === 'live')
  assert.equal(blue.openEventStreams, 1)
  assert.equal(gw.app.events.streams.stats().viewers, 0)

  blue.emit('info', { run_id: blue.run, app: 'expenses', goal: 'File the March report', agentic: true })
  blue.emit('status', { phase: 'agentic', detail: 'goal' })
  const { request_id } = blue.ask({
    title: 'Which cost centre?',
    help: 'help-text-never-in-the-overview',
    fields: [{ id: 'cc', type: 'string', enum: ['CC-1', 'CC-2'], required: true }],
    deadlineS: 120,
  })
  const asked = await overview.until(
    'the question',
    (m) => (m.get('k-blue')?.summary?.openRequests.length ?? 0) === 1,
  )
  const summary = asked.get('k-blue')?.summary
  assert.equal(summary?.app, 'expenses')
  assert.equal(summary?.phase, 'agentic')
  assert.equal(summary?.loop, 'running')
  assert.deepEqual(
    summary?.openRequests.map((r) => [r.requestId, r.title, r.fieldIds]),
    [[request_id, 'Which cost centre?', ['cc']]],
  )

  // A message and a reply through the gateway: their text and values never reach the overview.
  const base = `${gw.url}/desktop/k-blue/mcp/`
  assert.equal(
    (await call(`${base}messages`, 'POST', alice, { run: blue.run, key: 'm1', text: 'SECRET-TEXT' })).status,
    202,
  )
  const reply = await call(`${base}messages`, 'POST', alice, {
    run: blue.run,
    key: 'r1',
    reply_to: request_id,
    revision: 1,
    values: { cc: 'CC-2' },
  })
  assert.equal(reply.status, 202)
  await overview.until('the question to close', (m) => m.get('k-blue')?.summary?.openRequests.length === 0)
  for (const secret of ['SECRET-TEXT', 'CC-2', 'help-text-never']) {
    assert.ok(!overview.sse.raw.includes(secret), `${secret} reached the overview`)
  }

  // Runs end with their verdict.
  blue.emit('status', { phase: 'done', verdict: 'test-error', outcome: 'escalated', summary: 'Handed over.' })
  blue.closeTrace({ done: true })
  const done = await overview.until('the verdict', (m) => m.get('k-blue')?.summary?.ended === 'done')
  assert.equal(done.get('k-blue')?.summary?.verdict, 'test-error')
  assert.equal(done.get('k-blue')?.summary?.outcome, 'escalated')

  // A viewer gets the very same frames (nothing in them is beyond a viewer's read access).
  const viewer = await openOverview(t, gw, await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] }))
  const seen = await viewer.until('the viewer snapshot', (m) => m.get('k-blue')?.summary?.ended === 'done')
  assert.deepEqual(seen.get('k-blue'), done.get('k-blue'))
})

test('sessions appear, move teams and disappear live; a closed overview lets its summaries go', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const alice = await bearer({ sub: 'alice', roles: ['operator'], teams: ['blue'] })
  const overview = await openOverview(t, gw, alice)
  await waitFor('the empty snapshot', () => overview.sse.events.some((e) => e.event === 'ready'))
  assert.equal(overview.entries().size, 0)

  const rt = await addRuntime(t, gw, 'k1', 'blue')
  await overview.until('the new session', (m) => m.get('k1')?.health === 'live')
  await gw.app.sessions.put({
    kasmId: 'k1',
    upstream: rt.url,
    team: 'red',
    messagingToken: TOKEN,
    source: 'admin',
  })
  await overview.until('the session to leave with its team', (m) => !m.has('k1'))
  assert.ok(overview.sse.events.some((e) => e.event === 'gone' && JSON.parse(e.data).kasmId === 'k1'))
  await gw.app.sessions.put({
    kasmId: 'k1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  await overview.until('the session to come back', (m) => m.has('k1'))
  await gw.app.board.set('k1', 'claim:x', '{}')
  await gw.app.sessions.remove('k1')
  await overview.until('the removed session to go', (m) => !m.has('k1'))
  await waitFor('its board to go with it', async () => (await gw.app.board.read('k1')).size === 0)

  await addRuntime(t, gw, 'k2', 'blue')
  await overview.until('k2', (m) => m.get('k2')?.health === 'live')
  overview.close()
  await waitFor('the summaries and the reader to stop', () => {
    const hub = gw.app.overview.hub.stats()
    return hub.streams === 0 && hub.sessions === 0 && hub.timers === 0 && gw.app.summaries.watched === 0
  })
  await waitFor('no upstream reader left', () => gw.app.events.streams.stats().readers === 0)
})

test('reader health: not up yet, token refused, unreachable after a live stream', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const rt = await addRuntime(t, gw, 'k1', 'blue', { observeTokenRequired: true })
  rt.setDown(502)
  const overview = await openOverview(t, gw, await bearer())
  await overview.until('not up', (m) => m.get('k1')?.health === 'not_up')
  rt.setDown(null)
  await overview.until('live', (m) => m.get('k1')?.health === 'live')
  rt.setDown(500)
  rt.dropStreams()
  await overview.until('unreachable', (m) => m.get('k1')?.health === 'unreachable')
  rt.setDown(null)
  await overview.until('live again', (m) => m.get('k1')?.health === 'live')
  rt.rotateTokens({ messagingToken: 'another-token-the-gateway-does-not-have' })
  rt.dropStreams()
  await overview.until('token refused', (m) => m.get('k1')?.health === 'token_refused')
})

test('who watches a session is shown to every reader of it, names only', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  await addRuntime(t, gw, 'k1', 'blue')
  const viewer = await openOverview(t, gw, await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] }))
  await viewer.until('k1', (m) => m.has('k1'))
  const carol = await bearer({ sub: 'carol-sub', name: 'Carol', roles: ['operator'], teams: ['blue'] })
  const events = await openSse(`${gw.url}/desktop/k1/mcp/events`, { authorization: `Bearer ${carol}` })
  t.after(() => events.close())
  const watched = await viewer.until(
    'Carol watching',
    (m) => m.get('k1')?.watchers.includes('Carol') === true,
  )
  assert.deepEqual(watched.get('k1')?.watchers, ['Carol'])
  assert.ok(!viewer.sse.raw.includes('carol-sub'), 'names only: no subject id')
  events.close()
  await viewer.until('nobody watching', (m) => m.get('k1')?.watchers.length === 0)
})

test("I'm on it: one holder per question, shown on every overview, released by its holder or the question closing", async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  await addRuntime(t, gw, 'k-red', 'red')
  const carol = await bearer({ sub: 'carol', name: 'Carol', roles: ['operator'], teams: ['blue', 'red'] })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const vic = await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] })
  const overview = await openOverview(t, gw, dan)
  const { request_id } = rt.ask({ title: 'Which?', fields: [{ id: 'x', type: 'boolean', required: true }] })
  await overview.until('the question', (m) => m.get('k1')?.summary?.openRequests.length === 1)
  const claim = (who: string, method: string, id = request_id, run = rt.run, session = 'k1') =>
    call(`${gw.url}/api/sessions/${session}/requests/${id}/claim?run=${encodeURIComponent(run)}`, method, who)

  const taken = await claim(carol, 'PUT')
  assert.equal(taken.status, 200)
  assert.equal(taken.body?.name, 'Carol')
  await overview.until('the mark', (m) => m.get('k1')?.claims[request_id]?.name === 'Carol')
  assert.equal((await claim(carol, 'PUT')).status, 200, 'taking it again is fine')
  const second = await claim(dan, 'PUT')
  assert.equal(second.status, 409)
  assert.equal(second.body?.error, 'question_taken')
  assert.match(String(second.body?.message), /Carol/)
  const steal = await claim(dan, 'DELETE')
  assert.equal(steal.status, 409)
  assert.equal(steal.body?.error, 'question_not_yours')
  assert.equal((await claim(vic, 'PUT')).status, 403, 'a viewer cannot take a question')
  assert.equal(
    (await claim(dan, 'PUT', request_id, rt.run, 'k-red')).status,
    404,
    'a foreign session is unknown',
  )
  assert.equal((await claim(dan, 'PUT', request_id, 'bad run id')).status, 400)
  assert.equal((await claim(dan, 'PUT', 'x'.repeat(101))).status, 400)
  // With a cookie, a claim from another site is refused before anything is written.
  const signin = await request(`${gw.url}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${dan}` },
  })
  await signin.body.dump()
  const cookie = String(signin.headers['set-cookie']).split(';')[0] as string
  const forged = await request(
    `${gw.url}/api/sessions/k1/requests/${request_id}/claim?run=${encodeURIComponent(rt.run)}`,
    {
      method: 'PUT',
      headers: { cookie, 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    },
  )
  assert.equal(forged.statusCode, 403)
  assert.equal(((await forged.body.json()) as { error: string }).error, 'csrf_refused')

  assert.equal((await claim(carol, 'DELETE')).status, 204)
  await overview.until('the mark to go', (m) => m.get('k1')?.claims[request_id] === undefined)
  assert.equal((await claim(dan, 'PUT')).status, 200)
  await overview.until("Dan's mark", (m) => m.get('k1')?.claims[request_id]?.name === 'Dan')

  // The question closes (it timed out here): its mark goes with it, and it cannot be taken any more.
  const reply = await call(`${gw.url}/desktop/k1/mcp/messages`, 'POST', carol, {
    run: rt.run,
    key: 'r',
    reply_to: request_id,
    revision: 1,
    values: { x: true },
  })
  assert.equal(reply.status, 202)
  await overview.until('closed, mark gone', (m) => {
    const e = m.get('k1')
    return e?.summary?.openRequests.length === 0 && Object.keys(e.claims).length === 0
  })
  await waitFor('the board to forget the mark', async () => (await gw.app.board.read('k1')).size <= 1)
  const late = await claim(dan, 'PUT')
  assert.equal(late.status, 409)
  assert.equal(late.body?.error, 'question_closed')

  // Every claim and give-back is audited, refusals included: who, which question, through what.
  const records = (await gw.app.audit.recent({ limit: 100, kasmId: 'k1' }))
    .filter((r) => r.route === 'claim' && r.question === request_id)
    .reverse()
  assert.deepEqual(
    records.map((r) => [r.sub, r.method, r.action, r.status, r.error ?? null]),
    [
      ['carol', 'PUT', 'claim', 200, null],
      ['carol', 'PUT', 'claim', 200, null],
      ['dan', 'PUT', 'claim', 409, 'question_taken'],
      ['dan', 'DELETE', 'release', 409, 'question_not_yours'],
      ['carol', 'DELETE', 'release', 204, null],
      ['dan', 'PUT', 'claim', 200, null],
      ['dan', 'PUT', 'claim', 409, 'question_closed'],
    ],
  )
  assert.ok(records.every((r) => r.run === rt.run && r.via === 'api' && r.team === 'blue'))
  // A viewer's refusal comes before the handler: recorded under the route, without the question.
  const refusals = await gw.app.audit.recent({ limit: 100, kasmId: 'k1', sub: 'vic' })
  assert.deepEqual(
    refusals.filter((r) => r.route === 'claim').map((r) => [r.status, r.error]),
    [[403, 'forbidden']],
  )
})

test('who answered a question: from the audit log (name, time, request, run; never the values)', async (t) => {
  const gw = await startGateway(fastEnv)
  t.after(() => gw.close())
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  const carol = await bearer({ sub: 'carol', name: 'Carol', roles: ['operator'], teams: ['blue'] })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const vic = await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] })
  const { request_id } = rt.ask({ title: 'Pick', fields: [{ id: 'n', type: 'integer', required: true }] })
  const answer = (who: string, key: string, n: number) =>
    call(`${gw.url}/desktop/k1/mcp/messages`, 'POST', who, {
      run: rt.run,
      key,
      reply_to: request_id,
      revision: 1,
      values: { n },
    })
  const lookup = (who = vic, run = rt.run) =>
    call(`${gw.url}/api/sessions/k1/requests/${request_id}/answer?run=${encodeURIComponent(run)}`, 'GET', who)

  assert.equal((await lookup()).body?.error, 'answer_unknown')
  assert.equal((await answer(dan, 'd', 7)).status, 202)
  const lost = await answer(carol, 'c', 8)
  assert.equal(lost.status, 409, 'the runtime refuses the second answer')
  assert.equal(lost.body?.error, 'request_closed')
  const who = await lookup()
  assert.equal(who.status, 200)
  assert.equal(who.body?.name, 'Dan', 'the first accepted answer, not the refused one')
  assert.equal(typeof who.body?.at, 'string')
  assert.equal((await lookup(vic, 'another-run')).status, 404)
  assert.equal((await lookup(await bearer({ roles: ['viewer'], teams: ['red'] }))).status, 404)

  const records = await gw.app.audit.recent({ limit: 10, kasmId: 'k1' })
  const dans = records.find((r) => r.sub === 'dan')
  assert.equal(dans?.replyTo, request_id)
  assert.equal(dans?.run, rt.run)
  assert.equal(dans?.name, 'Dan')
  assert.ok(!JSON.stringify(records).includes('"n"'), 'no values in the audit')
})

test('an overview counts against the stream cap and ends when its credential does', async (t) => {
  const gw = await startGateway({ ...fastEnv, GATEWAY_MAX_STREAMS_PER_OPERATOR: '1' })
  t.after(() => gw.close())
  const token = await bearer({ sub: 'alice' }, { expiresIn: '2s' })
  const first = await openOverview(t, gw, token)
  assert.equal(first.sse.status, 200)
  const second = await openSse(`${gw.url}/api/overview`, { authorization: `Bearer ${token}` })
  assert.equal(second.status, 429)
  assert.equal((second.body as { error: string }).error, 'too_many_streams')
  assert.equal(await first.sse.ended, 'end', 'the stream ends once its token has expired')
  await waitFor('the reservation back', () => gw.app.overview.hub.stats().streams === 0)
  const again = await openSse(`${gw.url}/api/overview`, {
    authorization: `Bearer ${await bearer({ sub: 'alice' })}`,
  })
  t.after(() => again.close())
  assert.equal(again.status, 200)
})
