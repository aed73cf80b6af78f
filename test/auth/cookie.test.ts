import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sign, unsign } from '@fastify/cookie'
import { bearer } from '../helpers/jwt.ts'
import { type AuthGateway, auth, call, cookiePair, failures, startAuthGateway } from './harness.ts'

const COOKIE_SECRET = 'cookie-secret-for-tests-0123456789abcdef' // testEnv's
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin' }

/** Signs in with a bearer and returns the `name=value` cookie pair. */
async function signIn(gw: AuthGateway, claims: Parameters<typeof bearer>[0] = {}, expiresIn = '1h') {
  const res = await call(`${gw.url}/auth/session`, {
    method: 'POST',
    headers: auth(await bearer(claims, { expiresIn })),
  })
  assert.equal(res.status, 201, JSON.stringify(res.body))
  return { cookie: cookiePair(res), res }
}

test('POST /auth/session sets an HttpOnly, SameSite=Strict, signed, opaque cookie; /auth/me reads it', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie, res } = await signIn(gw, {
    sub: 'alice',
    name: 'Alice',
    roles: ['operator'],
    teams: ['red'],
  })
  const line = res.setCookies[0]!
  assert.match(line, /^krg_session=/)
  assert.match(line, /; HttpOnly/)
  assert.match(line, /; SameSite=Strict/)
  assert.match(line, /; Path=\//)
  assert.match(line, /; Max-Age=\d+/)
  assert.doesNotMatch(line, /; Secure/, 'http public origin: not Secure')
  const value = decodeURIComponent(cookie.slice('krg_session='.length))
  const unsigned = unsign(value, COOKIE_SECRET)
  assert.equal(unsigned.valid, true, 'signed with the cookie secret')
  assert.match(unsigned.value ?? '', /^[A-Za-z0-9_-]{43}$/, '32 random bytes, base64url: no claims inside')
  assert.deepEqual(res.body.roles, ['operator'])
  assert.equal(res.body.via, 'cookie')
  assert.equal(res.headers['cache-control'], 'no-store')

  const me = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(me.status, 200)
  assert.equal(me.body.sub, 'alice')
  assert.equal(me.body.name, 'Alice')
  assert.deepEqual(me.body.teams, ['red'])
  assert.equal(me.body.via, 'cookie')
  const read = await call(`${gw.url}/t/read`, { headers: { cookie } })
  assert.deepEqual(read.body, { sub: 'alice', via: 'cookie' })
})

test('the cookie session ends with the token it was made from when that is sooner than the TTL', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_COOKIE_TTL_S: '3600' })
  const short = await signIn(gw, {}, '2m')
  const shortMaxAge = Number(/Max-Age=(\d+)/.exec(short.res.setCookies[0]!)?.[1])
  assert.ok(shortMaxAge > 60 && shortMaxAge <= 120, `Max-Age ${shortMaxAge}`)
  const long = await signIn(gw, {}, '5h')
  const longMaxAge = Number(/Max-Age=(\d+)/.exec(long.res.setCookies[0]!)?.[1])
  assert.ok(longMaxAge > 3500 && longMaxAge <= 3600, `Max-Age ${longMaxAge}`)
  const expiresIn = Date.parse(String(long.res.body.expiresAt)) - Date.now()
  assert.ok(expiresIn > 3_500_000 && expiresIn <= 3_600_000)
})

test('an https public origin gives a __Host- cookie with Secure', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_PUBLIC_ORIGIN: 'https://gateway.test' })
  const res = await call(`${gw.url}/auth/session`, { method: 'POST', headers: auth(await bearer()) })
  assert.equal(res.status, 201)
  const cookie = cookiePair(res, '__Host-krg_session')
  assert.match(res.setCookies[0]!, /^__Host-krg_session=.*; Path=\/.*; Secure/)
  assert.doesNotMatch(res.setCookies[0]!, /Domain=/i)
  // The test client sends it back over http itself; the gateway reads the __Host- name.
  const me = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(me.status, 200)
})

test('POST /auth/session needs a bearer: a cookie cannot mint a cookie', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw)
  const res = await call(`${gw.url}/auth/session`, { method: 'POST', headers: { cookie, ...SAME_ORIGIN } })
  assert.equal(res.status, 401)
  assert.equal(res.body.error, 'unauthenticated')
  assert.equal(res.setCookies.length, 0)
})

test('tampered, unsigned, foreign-signed and unknown cookies are 401 and cleared', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw)
  const value = decodeURIComponent(cookie.slice('krg_session='.length))
  const id = unsign(value, COOKIE_SECRET).value!
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1)
  const bad = {
    'tampered id': flip(value, 3),
    'tampered signature': flip(value, value.length - 2),
    unsigned: id,
    'signed with another secret': sign(id, 'another-cookie-secret-0123456789abcdef'),
    'unknown id, validly signed': sign('x'.repeat(43), COOKIE_SECRET),
  }
  // The real cookie's signature is verified and kept (by hash) first: none of its variants may ride on it.
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie } })).status, 200)
  for (const [what, v] of Object.entries(bad)) {
    const res = await call(`${gw.url}/auth/me`, {
      headers: { cookie: `krg_session=${encodeURIComponent(v)}` },
    })
    assert.equal(res.status, 401, what)
    assert.equal(res.body.error, 'invalid_credential', what)
    assert.match(res.setCookies[0] ?? '', /^krg_session=;.*Max-Age=0/, `${what}: cookie cleared`)
  }
  assert.equal(await failures(gw.app, 'cookie_invalid'), 5)
  assert.equal(
    (await call(`${gw.url}/auth/me`, { headers: { cookie } })).status,
    200,
    'the real one still works',
  )
})

test('DELETE /auth/session revokes server-side: the same cookie is then refused', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw)
  const other = await signIn(gw)
  const out = await call(`${gw.url}/auth/session`, { method: 'DELETE', headers: { cookie, ...SAME_ORIGIN } })
  assert.equal(out.status, 204)
  assert.match(out.setCookies[0] ?? '', /^krg_session=;.*Max-Age=0/)
  const after = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(after.status, 401)
  assert.match(String(after.body.message), /signed out/)
  assert.equal(await failures(gw.app, 'cookie_revoked'), 1)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie: other.cookie } })).status, 200)
  const again = await call(`${gw.url}/auth/session`, {
    method: 'DELETE',
    headers: { cookie, ...SAME_ORIGIN },
  })
  assert.equal(again.status, 401)
})

test('CSRF: cookie writes need same-origin or an allowed Origin; refused ones never reach the route', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_ALLOWED_ORIGINS: 'https://ui.example' })
  const { cookie } = await signIn(gw)
  const refusedCases: Record<string, Record<string, string>> = {
    'neither header': {},
    'Sec-Fetch-Site cross-site': { 'sec-fetch-site': 'cross-site' },
    'Sec-Fetch-Site same-site, foreign Origin': {
      'sec-fetch-site': 'same-site',
      origin: 'https://evil.gateway.test',
    },
    'Sec-Fetch-Site none': { 'sec-fetch-site': 'none' },
    'foreign Origin': { origin: 'https://evil.example' },
    'Origin null': { origin: 'null' },
    'cross-site with a foreign Origin': { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
  }
  for (const [what, headers] of Object.entries(refusedCases)) {
    const res = await call(`${gw.url}/t/write`, { method: 'POST', headers: { cookie, ...headers } })
    assert.equal(res.status, 403, what)
    assert.equal(res.body.error, 'csrf_refused', what)
  }
  assert.equal(gw.reached.get('write') ?? 0, 0, 'no refused write reached the handler')
  assert.equal(await failures(gw.app, 'csrf'), Object.keys(refusedCases).length)

  const allowedCases: Record<string, Record<string, string>> = {
    'Sec-Fetch-Site same-origin': SAME_ORIGIN,
    'Origin = GATEWAY_PUBLIC_ORIGIN': { origin: 'http://gateway.test' },
    'same-site UI in GATEWAY_ALLOWED_ORIGINS': {
      'sec-fetch-site': 'same-site',
      origin: 'https://ui.example',
    },
    'cross-site UI in GATEWAY_ALLOWED_ORIGINS': {
      'sec-fetch-site': 'cross-site',
      origin: 'https://ui.example',
    },
  }
  for (const [what, headers] of Object.entries(allowedCases)) {
    const res = await call(`${gw.url}/t/write`, { method: 'POST', headers: { cookie, ...headers } })
    assert.equal(res.status, 200, what)
  }
  // Reads are safe cross-site; a bearer write carries no ambient credential, so no CSRF rule.
  const read = await call(`${gw.url}/t/read`, { headers: { cookie, 'sec-fetch-site': 'cross-site' } })
  assert.equal(read.status, 200)
  const bearerWrite = await call(`${gw.url}/t/write`, {
    method: 'POST',
    headers: { ...auth(await bearer()), 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
  })
  assert.equal(bearerWrite.status, 200)
})

test('CSRF: cross-site sign-out is refused and the session survives; admin writes are checked too', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw, { roles: ['admin'] })
  const out = await call(`${gw.url}/auth/session`, {
    method: 'DELETE',
    headers: { cookie, 'sec-fetch-site': 'cross-site' },
  })
  assert.equal(out.status, 403)
  assert.equal(out.body.error, 'csrf_refused')
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie } })).status, 200)
  const admin = await call(`${gw.url}/t/admin`, { method: 'POST', headers: { cookie } })
  assert.equal(admin.status, 403)
  assert.equal(admin.body.error, 'csrf_refused')
  assert.equal(
    (await call(`${gw.url}/t/admin`, { method: 'POST', headers: { cookie, ...SAME_ORIGIN } })).status,
    200,
  )
})

test('CSRF without a configured public origin: the gateway’s own origin is allowed', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_PUBLIC_ORIGIN: '' })
  const { cookie } = await signIn(gw)
  const own = await call(`${gw.url}/t/write`, { method: 'POST', headers: { cookie, origin: gw.url } })
  assert.equal(own.status, 200)
  const foreign = await call(`${gw.url}/t/write`, {
    method: 'POST',
    headers: { cookie, origin: 'http://127.0.0.1:1' },
  })
  assert.equal(foreign.status, 403)
})

test('a viewer cookie write passes CSRF but is 403 forbidden', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw, { roles: ['viewer'] })
  const res = await call(`${gw.url}/t/write`, { method: 'POST', headers: { cookie, ...SAME_ORIGIN } })
  assert.equal(res.status, 403)
  assert.equal(res.body.error, 'forbidden')
  assert.equal(gw.reached.get('write') ?? 0, 0)
})

test('idle timeout: use refreshes it, GATEWAY_COOKIE_IDLE_S without use ends the session', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_COOKIE_IDLE_S: '60', GATEWAY_COOKIE_TTL_S: '3600' })
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
  const { cookie } = await signIn(gw)
  for (let i = 0; i < 3; i++) {
    t.mock.timers.tick(50_000) // 150 s in all, but never 60 s without use
    assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie } })).status, 200, `use ${i}`)
  }
  t.mock.timers.tick(61_000)
  const res = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(res.status, 401)
  assert.match(String(res.body.message), /inactivity/)
  assert.equal(await failures(gw.app, 'cookie_idle'), 1)
})

test('absolute expiry: GATEWAY_COOKIE_TTL_S ends the session however busy', async (t) => {
  const gw = await startAuthGateway(t, { GATEWAY_COOKIE_IDLE_S: '60', GATEWAY_COOKIE_TTL_S: '120' })
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
  const { cookie } = await signIn(gw)
  t.mock.timers.tick(50_000)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie } })).status, 200)
  t.mock.timers.tick(50_000)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie } })).status, 200)
  t.mock.timers.tick(25_000)
  const res = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(res.status, 401)
  assert.match(String(res.body.message), /expired/)
  assert.equal(await failures(gw.app, 'cookie_expired'), 1)
})

test('secret rotation: a cookie signed with the old secret still works after "new,old" and is re-signed', async (t) => {
  const OLD = COOKIE_SECRET
  const NEW = 'the-new-cookie-secret-0123456789abcdefgh'
  const gw = await startAuthGateway(t, { GATEWAY_COOKIE_SECRET: `${NEW},${OLD}` })
  const { cookie } = await signIn(gw)
  const value = decodeURIComponent(cookie.slice('krg_session='.length))
  const signedNew = unsign(value, NEW)
  assert.equal(signedNew.valid, true, 'the first secret signs')
  assert.equal(unsign(value, OLD).valid, false)
  // The same session id as a browser would hold it from before the rotation: signed with the old secret.
  const oldCookie = `krg_session=${encodeURIComponent(sign(signedNew.value!, OLD))}`
  const res = await call(`${gw.url}/auth/me`, { headers: { cookie: oldCookie } })
  assert.equal(res.status, 200)
  const renewed = decodeURIComponent(cookiePair(res).slice('krg_session='.length))
  assert.equal(unsign(renewed, NEW).value, signedNew.value, 're-signed with the new secret')
  // Every answer to the old cookie re-signs it, until the browser holds the new one.
  const again = await call(`${gw.url}/auth/me`, { headers: { cookie: oldCookie } })
  assert.equal(
    unsign(decodeURIComponent(cookiePair(again).slice('krg_session='.length)), NEW).value,
    signedNew.value,
  )
  const dropped = `krg_session=${encodeURIComponent(sign(signedNew.value!, 'retired-secret-0123456789abcdefghij'))}`
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie: dropped } })).status, 401)
})

test('login ticket: one use sets the cookie and redirects 303 to /; reuse, unknown and expired are 401', async (t) => {
  const gw = await startAuthGateway(t)
  const ticket = gw.app.auth.issueLoginTicket({
    sub: 'demo',
    name: 'Demo',
    roles: ['operator'],
    teams: ['*'],
  })
  assert.match(ticket, /^[A-Za-z0-9_-]{43}$/)
  const first = await call(`${gw.url}/auth/login?ticket=${ticket}`)
  assert.equal(first.status, 303)
  assert.equal(first.headers.location, '/')
  const cookie = cookiePair(first)
  const me = await call(`${gw.url}/auth/me`, { headers: { cookie } })
  assert.equal(me.body.sub, 'demo')
  assert.deepEqual(me.body.roles, ['operator'])

  const second = await call(`${gw.url}/auth/login?ticket=${ticket}`)
  assert.equal(second.status, 401)
  assert.equal(second.body.error, 'invalid_credential')
  assert.equal(second.setCookies.length, 0)
  assert.equal((await call(`${gw.url}/auth/login?ticket=${'x'.repeat(43)}`)).status, 401)
  // Without a ticket it is the sign-in through the identity provider, which this gateway has none of.
  const bare = await call(`${gw.url}/auth/login`)
  assert.equal(bare.status, 404)
  assert.equal(bare.body.error, 'signin_not_configured')

  t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
  const stale = gw.app.auth.issueLoginTicket({ sub: 'demo', roles: ['viewer'], teams: [] })
  t.mock.timers.tick(10 * 60_000 + 1000)
  assert.equal((await call(`${gw.url}/auth/login?ticket=${stale}`)).status, 401)
  assert.equal(await failures(gw.app, 'ticket_invalid'), 3)
})

test('stillValid: cookie operators until revoked, bearer operators until exp', async (t) => {
  const gw = await startAuthGateway(t)
  const { cookie } = await signIn(gw)
  await call(`${gw.url}/t/read`, { headers: { cookie } })
  const viaCookie = gw.lastOperator()!
  assert.equal(viaCookie.via, 'cookie')
  assert.equal(await gw.app.auth.stillValid(viaCookie), true)
  await call(`${gw.url}/t/read`, { headers: auth(await bearer({}, { expiresIn: '1h' })) })
  const viaBearer = gw.lastOperator()!
  assert.equal(viaBearer.via, 'bearer')
  assert.equal(await gw.app.auth.stillValid(viaBearer), true)

  await call(`${gw.url}/auth/session`, { method: 'DELETE', headers: { cookie, ...SAME_ORIGIN } })
  assert.equal(await gw.app.auth.stillValid(viaCookie), false)
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
  t.mock.timers.tick(3_601_000)
  assert.equal(await gw.app.auth.stillValid(viaBearer), false)
})

test('revokeCookieSessions signs one operator out everywhere', async (t) => {
  const gw = await startAuthGateway(t)
  const a1 = await signIn(gw, { sub: 'alice' })
  const a2 = await signIn(gw, { sub: 'alice' })
  const b = await signIn(gw, { sub: 'bob' })
  assert.equal(await gw.app.auth.revokeCookieSessions('alice'), 2)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie: a1.cookie } })).status, 401)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie: a2.cookie } })).status, 401)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { cookie: b.cookie } })).status, 200)
})
