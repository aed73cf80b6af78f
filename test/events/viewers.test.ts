import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withoutRequestId } from '../helpers/error-body.ts'
import { bearer } from '../helpers/jwt.ts'
import { eventsAtLeast, openSse, startStack, until } from './helpers.ts'

test('per-operator cap: the stream over the limit gets 429 too_many_streams; closing one frees a slot', async (t) => {
  const { gw, token, eventsUrl } = await startStack(t, { GATEWAY_MAX_STREAMS_PER_OPERATOR: '2' })
  const auth = { authorization: `Bearer ${token}` }
  const a = await openSse(eventsUrl, auth)
  const b = await openSse(eventsUrl, auth)
  t.after(() => {
    a.close()
    b.close()
  })
  const refused = await openSse(eventsUrl, auth)
  assert.equal(refused.status, 429)
  assert.equal((refused.body as { error: string }).error, 'too_many_streams')
  // Another operator is not affected.
  const bob = await openSse(eventsUrl, { authorization: `Bearer ${await bearer({ sub: 'bob' })}` })
  t.after(() => bob.close())
  assert.equal(bob.status, 200)
  a.close()
  await until('the slot to be released', () => gw.app.events.streams.viewers().length === 2)
  const again = await openSse(eventsUrl, auth)
  t.after(() => again.close())
  assert.equal(again.status, 200)
})

test('a viewer that hangs up is freed at once, not at the next heartbeat', async (t) => {
  // Pings every minute: only the client's FIN can tell the gateway the viewer left.
  const { gw, token, eventsUrl } = await startStack(t, { GATEWAY_PING_INTERVAL_MS: '60000' })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  await until('the viewer to be counted', () => gw.app.events.streams.viewers().length === 1)
  viewer.close()
  // Half the ping interval: generous for a loaded machine, and a viewer only the next ping found gone fails.
  await until('the viewer to be freed', () => gw.app.events.streams.viewers().length === 0, 30_000)
})

test('refusals: no credential 401, unknown or foreign session 404, viewer role is enough', async (t) => {
  const { gw, token, eventsUrl } = await startStack(t)
  const none = await openSse(eventsUrl)
  assert.equal(none.status, 401)
  const badToken = await openSse(eventsUrl, {
    authorization: `Bearer ${await bearer({}, { secret: 'x'.repeat(64) })}`,
  })
  assert.equal(badToken.status, 401)
  const unknown = await openSse(`${gw.url}/desktop/nope/mcp/events`, { authorization: `Bearer ${token}` })
  assert.equal(unknown.status, 404)
  const foreign = await openSse(eventsUrl, {
    authorization: `Bearer ${await bearer({ teams: ['red'] })}`,
  })
  assert.equal(foreign.status, 404)
  assert.deepEqual(
    withoutRequestId(foreign.body),
    withoutRequestId(unknown.body),
    'a foreign session looks exactly like an unknown one',
  )
  const viewerRole = await openSse(eventsUrl, {
    authorization: `Bearer ${await bearer({ roles: ['viewer'], teams: ['blue'] })}`,
  })
  t.after(() => viewerRole.close())
  assert.equal(viewerRole.status, 200)
  const noRole = await openSse(eventsUrl, { authorization: `Bearer ${await bearer({ roles: [] })}` })
  assert.equal(noRole.status, 403)
  assert.equal(gw.app.events.streams.stats().viewers, 1)
})

test('a revoked cookie ends the stream; an expired token ends it too', async (t) => {
  const { gw, token, eventsUrl } = await startStack(t)
  const login = await fetch(`${gw.url}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  })
  assert.equal(login.status, 201)
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  assert.ok(cookie.includes('='))
  const byCookie = await openSse(eventsUrl, { cookie })
  t.after(() => byCookie.close())
  assert.equal(byCookie.status, 200)
  await eventsAtLeast(byCookie, 1)

  const shortToken = await bearer({}, { expiresIn: '3s' })
  const byShortToken = await openSse(eventsUrl, { authorization: `Bearer ${shortToken}` })
  t.after(() => byShortToken.close())
  assert.equal(byShortToken.status, 200)

  const signOut = await fetch(`${gw.url}/auth/session`, {
    method: 'DELETE',
    headers: { cookie, origin: 'http://gateway.test' },
  })
  assert.equal(signOut.status, 204)
  // GATEWAY_STREAM_AUTH_RECHECK_MS is 1000 here.
  assert.equal(await byCookie.ended, 'end')
  assert.equal(byShortToken.isEnded, false)
  assert.equal(await byShortToken.ended, 'end')
  // The revoked cookie cannot open a new stream.
  const again = await openSse(eventsUrl, { cookie })
  assert.equal(again.status, 401)
  await until('both viewers gone', () => gw.app.events.streams.stats().viewers === 0)
})

test('shutdown ends every viewer stream cleanly and at once', async (t) => {
  const { gw, token, eventsUrl } = await startStack(t)
  const auth = { authorization: `Bearer ${token}` }
  const viewers = await Promise.all(Array.from({ length: 10 }, () => openSse(eventsUrl, auth)))
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 1)))
  const started = Date.now()
  await gw.close()
  const ends = await Promise.all(viewers.map((v) => v.ended))
  assert.deepEqual(new Set(ends), new Set(['end']))
  // Under half the shutdown grace (30 s), which is what a close that waited would take; generous for a loaded
  // machine.
  assert.ok(Date.now() - started < 15_000, 'close did not wait for the grace')
  assert.deepEqual(gw.app.events.streams.stats(), {
    viewers: 0,
    sessions: 0,
    readers: 0,
    heartbeatTargets: 0,
    timers: 0,
  })
})

test('a draining replica stops reading first, then ends its viewers spread over the window', async (t) => {
  const { gw, rt, token, eventsUrl } = await startStack(t)
  const auth = { authorization: `Bearer ${token}` }
  const viewers = await Promise.all(Array.from({ length: 20 }, () => openSse(eventsUrl, auth)))
  await Promise.all(viewers.map((v) => eventsAtLeast(v, 1)))
  const endedAt: number[] = []
  let readersAtFirstEnd = -1
  for (const v of viewers) {
    void v.ended.then(() => {
      if (endedAt.length === 0) readersAtFirstEnd = gw.app.events.streams.stats().readers
      endedAt.push(Date.now())
    })
  }
  gw.app.readiness.drain()
  const refused = await openSse(eventsUrl, auth)
  assert.equal(refused.status, 503)
  assert.equal((refused.body as { error: string }).error, 'shutting_down')
  await gw.app.events.streams.close(5000, 1000)
  await until('every viewer to end', () => endedAt.length === viewers.length)
  await until('the runtime to see its one reader gone', () => rt.openEventStreams === 0)
  assert.deepEqual(new Set(await Promise.all(viewers.map((v) => v.ended))), new Set(['end']))
  assert.equal(readersAtFirstEnd, 0, 'the upstream reader stopped before any viewer was told to go')
  const span = Math.max(...endedAt) - Math.min(...endedAt)
  assert.ok(span >= 600, `viewers ended within ${span} ms: not spread`)
})
