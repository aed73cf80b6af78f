import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { type TestContext, test } from 'node:test'
import { generateKeyPair, SignJWT } from 'jose'
import { request } from 'undici'
import { addRuntimeSession, openSse, until } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import {
  Browser,
  CLIENT_ID,
  type SignInStack,
  sessionCookie,
  signedIn,
  signInAt,
  startSignInStack,
} from './harness.ts'

/** After sign-in: refreshes at the IdP, RP-initiated logout, back-channel logout, and its refusals. */

const LOGOUT_EVENT = { 'http://schemas.openid.net/event/backchannel-logout': {} }

async function me(stack: SignInStack, cookie: string) {
  const res = await request(`${stack.base}auth/me`, { headers: { cookie } })
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> }
}

async function audit(stack: SignInStack) {
  const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
  const res = await request(`${stack.base}admin/audit?limit=50`, { headers: { authorization: admin } })
  return ((await res.body.json()) as { records: Record<string, unknown>[] }).records
}

async function refreshes(stack: SignInStack, outcome: string): Promise<number> {
  const metrics = await stack.app.metrics.registry.getSingleMetric('krg_signin_refreshes_total')?.get()
  return metrics?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0
}

/** A session `s1` of team blue on a simulated runtime, and an event stream opened with `cookie`. */
async function watch(t: TestContext, stack: SignInStack, cookie: string) {
  await addRuntimeSession(t, stack.app, 's1', { observeTokenRequired: false })
  const stream = await openSse(`${stack.origin}/desktop/s1/mcp/events`, { cookie })
  assert.equal(stream.status, 200)
  t.after(() => stream.close())
  return stream
}

const refreshEnv = { GATEWAY_OIDC_REFRESH_S: '1', GATEWAY_STREAM_AUTH_RECHECK_MS: '1000' }

test('roles and teams follow the IdP: a refresh with the refresh token updates the session', async (t) => {
  const stack = await startSignInStack(t, { env: refreshEnv })
  const { cookie } = await signedIn(stack)
  assert.deepEqual((await me(stack, cookie)).body.roles, ['operator'])
  stack.idp.updatePerson('olivia', { roles: ['viewer', 'admin'], teams: ['red'] })
  // Each use of the session after its refresh time starts one refresh; the next use sees the result.
  await until('the new roles', async () => {
    const { body } = await me(stack, cookie)
    return JSON.stringify([body.roles, body.teams]) === JSON.stringify([['viewer', 'admin'], ['red']])
  })
  assert.ok((stack.idp.grants.get('refresh_token') ?? 0) >= 1)
  assert.ok((await refreshes(stack, 'updated')) >= 1)
  // The rotated refresh token was kept: a second refresh works too.
  stack.idp.updatePerson('olivia', { roles: ['operator'] })
  await until('refreshed again', async () => {
    const { body } = await me(stack, cookie)
    return JSON.stringify(body.roles) === '["operator"]'
  })
})

test('a person disabled at the IdP loses the session at the next refresh, and their open streams end', async (t) => {
  const stack = await startSignInStack(t, { env: refreshEnv })
  const { cookie } = await signedIn(stack)
  const stream = await watch(t, stack, cookie)
  stack.idp.updatePerson('olivia', { disabled: true })
  // The open stream alone uses the session (its recheck), which starts the refresh the IdP refuses.
  await until('the stream ended', () => stream.isEnded)
  assert.equal((await me(stack, cookie)).status, 401)
  assert.equal(await refreshes(stack, 'refused'), 1)
})

test('the IdP down at refresh time: the session stays and the refresh is tried again later', async (t) => {
  const stack = await startSignInStack(t, { env: refreshEnv })
  const { cookie } = await signedIn(stack)
  await stack.idp.close()
  await until('a refresh failed', async () => {
    await me(stack, cookie)
    return (await refreshes(stack, 'failed')) >= 1
  })
  assert.equal((await me(stack, cookie)).status, 200)
})

test('sign-out: CSRF-checked, ends the session everywhere, then RP-initiated logout at the IdP and back', async (t) => {
  const stack = await startSignInStack(t)
  const { browser, cookie } = await signedIn(stack)

  const forged = await request(`${stack.base}auth/logout`, {
    method: 'POST',
    headers: { cookie, 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
  })
  assert.equal(forged.statusCode, 403)
  assert.equal(((await forged.body.json()) as { error: string }).error, 'csrf_refused')
  assert.equal((await me(stack, cookie)).status, 200, 'still signed in')

  const out = await browser.request(`${stack.base}auth/logout`, { method: 'POST', form: {} })
  assert.equal(out.status, 303)
  const end = new URL(out.location ?? '')
  assert.equal(`${end.origin}${end.pathname}`, `${stack.idp.issuer}/session/end`)
  assert.equal(end.searchParams.get('post_logout_redirect_uri'), `${stack.base}auth/logged-out`)
  assert.equal(end.searchParams.get('client_id'), CLIENT_ID)
  assert.match(end.searchParams.get('id_token_hint') ?? '', /^eyJ/)
  assert.equal((await me(stack, cookie)).status, 401, 'ended before the IdP is even asked')

  const confirm = await browser.navigate(out.location ?? '')
  const back = await browser.submit(confirm, '/session/end/confirm', { logout: 'yes' })
  assert.equal(back.url, `${stack.base}auth/logged-out`)
  assert.equal(back.status, 200)
  assert.match(back.text, /<h1>You are signed out<\/h1>/)
  assert.match(back.text, /Sign in again/)
  const record = (await audit(stack)).find((r) => r.route === 'auth/logout' && r.status === 303)
  assert.deepEqual([record?.sub, record?.action], ['olivia', 'sign_out'])
  // Signing out again (stale tab) is harmless: straight to the signed-out page.
  const again = await new Browser().request(`${stack.base}auth/logout`, { method: 'POST', form: {} })
  assert.equal(again.status, 303)
})

test('back-channel logout from the IdP ends the cookie session and its live event stream at once', async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_STREAM_AUTH_RECHECK_MS: '60000' } })
  const { browser, cookie } = await signedIn(stack)
  const stream = await watch(t, stack, cookie)
  // Another sign-in of olivia, in another browser (another IdP session): untouched.
  const other = new Browser()
  await signInAt(stack, other)

  // The person signs out at the IdP itself (not through the gateway): the IdP tells the gateway.
  const confirm = await browser.navigate(`${stack.idp.issuer}/session/end`)
  await browser.submit(confirm, '/session/end/confirm', { logout: 'yes' })
  // Half the periodic recheck (a minute): generous for a loaded machine, and a logout only the recheck noticed
  // fails.
  await until('the stream ended', () => stream.isEnded, 30_000)
  assert.equal((await me(stack, cookie)).status, 401)
  assert.equal((await me(stack, sessionCookie(other))).status, 200, 'only that IdP session')
  const record = (await audit(stack)).find((r) => r.route === 'auth/backchannel-logout')
  assert.deepEqual([record?.status, record?.sub, record?.action], [200, 'olivia', 'backchannel_logout'])
})

test('back-channel logout refuses every token that is not a logout token of this IdP for this gateway', async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_SIGNIN_FAILURES_MAX: '1000' } })
  const { cookie } = await signedIn(stack)
  const now = Math.floor(Date.now() / 1000)
  const good = {
    iss: stack.idp.issuer,
    aud: CLIENT_ID,
    iat: now,
    jti: randomBytes(8).toString('hex'),
    events: LOGOUT_EVENT,
  }
  const { privateKey } = await generateKeyPair('RS256')
  const foreign = await new SignJWT({ ...good, sub: 'olivia' })
    .setProtectedHeader({ alg: 'RS256', typ: 'logout+jwt' })
    .sign(privateKey)
  const withoutEvents: Record<string, unknown> = { ...good, sub: 'olivia' }
  delete withoutEvents.events
  const bad: [string, string][] = [
    ['not a JWT', 'garbage'],
    ['signed by another key', foreign],
    [
      'another audience',
      await stack.idp.sign({ ...good, aud: 'someone-else', sub: 'olivia' }, { typ: 'logout+jwt' }),
    ],
    [
      'another issuer',
      await stack.idp.sign({ ...good, iss: 'https://evil.example', sub: 'olivia' }, { typ: 'logout+jwt' }),
    ],
    ['no logout event', await stack.idp.sign(withoutEvents, { typ: 'logout+jwt' })],
    [
      'a nonce (an ID token)',
      await stack.idp.sign({ ...good, sub: 'olivia', nonce: 'n' }, { typ: 'logout+jwt' }),
    ],
    ['neither sid nor sub', await stack.idp.sign(good, { typ: 'logout+jwt' })],
    ['another typ', await stack.idp.sign({ ...good, sub: 'olivia' }, { typ: 'at+jwt' })],
    ['too old', await stack.idp.sign({ ...good, sub: 'olivia', iat: now - 3600 }, { typ: 'logout+jwt' })],
  ]
  const post = (body: string) =>
    request(`${stack.base}auth/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    })
  for (const [why, token] of bad) {
    const res = await post(new URLSearchParams({ logout_token: token }).toString())
    assert.equal(res.statusCode, 400, why)
    assert.equal(((await res.body.json()) as { error: string }).error, 'logout_token_invalid', why)
    assert.equal(res.headers['cache-control'], 'no-store')
  }
  for (const body of ['', 'logout_token=', `logout_token=a&logout_token=b`]) {
    const res = await post(body)
    assert.equal(res.statusCode, 400, body)
    await res.body.dump()
  }
  assert.equal((await me(stack, cookie)).status, 200, 'nothing was signed out')
  const codes = (await audit(stack)).filter((r) => r.route === 'auth/backchannel-logout').map((r) => r.error)
  assert.equal(codes.length, bad.length + 3)
  assert.ok(codes.every((c) => c === 'logout_token_invalid'))

  // The real thing, naming only the subject (no sid): every session of that person ends.
  const res = await post(
    new URLSearchParams({
      logout_token: await stack.idp.sign({ ...good, sub: 'olivia' }, { typ: 'logout+jwt' }),
    }).toString(),
  )
  assert.equal(res.statusCode, 200)
  assert.deepEqual(await res.body.json(), { ended: 1 })
  assert.equal((await me(stack, cookie)).status, 401)
})
