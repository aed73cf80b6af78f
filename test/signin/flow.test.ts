import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { freePort } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { Browser, type SignInStack, sessionCookie, signInAt, startSignInStack } from './harness.ts'
import { jwtClaims, startIdpStandIn } from './idp-stand-in.ts'

/** The sign-in flow against a real OpenID provider: what works, and each way it fails. */

async function me(stack: SignInStack, browser: Browser) {
  const res = await request(`${stack.base}auth/me`, { headers: { cookie: sessionCookie(browser) } })
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> }
}

async function audit(stack: SignInStack) {
  const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
  const res = await request(`${stack.base}admin/audit?limit=50`, { headers: { authorization: admin } })
  return ((await res.body.json()) as { records: Record<string, unknown>[] }).records
}

/** Every answer the gateway gave the browser, to check that no IdP token (a JWT) ever reached it. */
function gatewayAnswers(browser: Browser, stack: SignInStack): string {
  return browser.visited.filter((u) => u.startsWith(stack.origin)).join('\n')
}

test('a person signs in: login, consent, callback, a cookie session of the gateway, and back to return_to', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()

  // The first hop: the IdP's authorization endpoint with state, nonce and a PKCE S256 challenge.
  const start = await browser.request(`${stack.base}auth/login?return_to=%2Fdesktop%2Fk1%2Fvnc%2Findex.html`)
  assert.equal(start.status, 302)
  const authorize = new URL(start.location ?? '')
  assert.equal(authorize.origin, new URL(stack.idp.issuer).origin)
  const q = authorize.searchParams
  assert.equal(q.get('response_type'), 'code')
  assert.equal(q.get('client_id'), 'kasm-runtime-gateway')
  assert.equal(q.get('redirect_uri'), `${stack.base}auth/callback`)
  assert.equal(q.get('scope'), 'openid profile email')
  assert.equal(q.get('code_challenge_method'), 'S256')
  assert.match(q.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/)
  assert.match(q.get('state') ?? '', /^[A-Za-z0-9_-]{43}$/)
  assert.match(q.get('nonce') ?? '', /^[A-Za-z0-9_-]{43}$/)
  assert.notEqual(q.get('state'), q.get('nonce'))
  // Bound to this browser by a short-lived HttpOnly cookie that comes back on the IdP's cross-site redirect.
  const binding = start.headers.getSetCookie().find((c) => c.startsWith('krg_signin='))
  assert.match(binding ?? '', /; Max-Age=600; Path=\/; HttpOnly; SameSite=Lax/)
  assert.equal(start.headers.get('cache-control'), 'no-store')

  const page = await signInAt(stack, browser, { returnTo: '/desktop/k1/vnc/index.html?kasm_runtime_token=x' })
  const callback = browser.visited.find((u) => u.startsWith(`${stack.base}auth/callback`))
  assert.ok(callback, 'came back through the callback')
  assert.equal(browser.visited.at(-1), `${stack.origin}/desktop/k1/vnc/index.html?kasm_runtime_token=x`)
  assert.equal(page.url, browser.visited.at(-1))
  assert.equal(browser.cookies.has('krg_signin'), false, 'the binding is cleared once used')

  const who = await me(stack, browser)
  assert.equal(who.status, 200)
  assert.deepEqual(who.body, {
    sub: 'olivia',
    name: 'Olivia Operator',
    roles: ['operator'],
    teams: ['blue', 'red'],
    via: 'cookie',
    expiresAt: who.body.expiresAt,
  })
  // The session lives GATEWAY_COOKIE_TTL_S (8 h), not the ID token's ten minutes.
  const lifetime = Date.parse(String(who.body.expiresAt)) - Date.now()
  assert.ok(lifetime > 7.9 * 3600_000, `cookie session lifetime ${lifetime} ms`)
  assert.doesNotMatch(gatewayAnswers(browser, stack), /eyJ[A-Za-z0-9_-]+\.eyJ/, 'no IdP token in any URL')

  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  assert.equal(record?.sub, 'olivia')
  assert.equal(record?.action, 'sign_in')
  assert.equal(record?.status, 303)
  assert.equal(record?.error, undefined)

  // Signed in already: auth/login goes straight back without bothering the IdP.
  const again = await browser.request(`${stack.base}auth/login?return_to=%2Fgateway-console`)
  assert.equal(again.status, 303)
  assert.equal(again.location, `${stack.origin}/gateway-console`)
  // Unless the person asks to sign in anew (another account).
  const anew = await browser.request(`${stack.base}auth/login?prompt=login`)
  assert.equal(anew.status, 302)
  assert.equal(new URL(anew.location ?? '').searchParams.get('prompt'), 'login')
})

test('after an IdP on another site the callback answers with a page that continues by itself, no redirect', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()
  const toCallback = await signInAt(stack, browser, {
    stopAtCallback: true,
    returnTo: '/desktop/k1/vnc/vnc.html',
  })
  browser.site = 'cross-site'
  const page = await browser.request(toCallback.location ?? '')
  assert.equal(page.status, 200)
  assert.match(page.text, /<meta http-equiv="refresh" content="0; url=\/desktop\/k1\/vnc\/vnc.html">/)
  assert.match(page.text, /<a class="primary" href="\/desktop\/k1\/vnc\/vnc.html">Continue<\/a>/)
  assert.match(page.text, /signed in as Olivia Operator/)
  assert.equal((await me(stack, browser)).status, 200)
})

test('roles and teams come from userinfo when the ID token does not carry them', async (t) => {
  const stack = await startSignInStack(t, { idp: { claimsIn: 'userinfo' } })
  const browser = new Browser()
  await signInAt(stack, browser, { username: 'victor' })
  const who = await me(stack, browser)
  assert.deepEqual([who.body.sub, who.body.roles, who.body.teams], ['victor', ['viewer'], ['blue']])
})

test('an IdP that only emits groups: GATEWAY_OIDC_GROUP_MAP maps them (Keycloak-style dotted claims too)', async (t) => {
  const stack = await startSignInStack(t, {
    env: {
      GATEWAY_OIDC_GROUP_MAP: 'support-blue=operator team:blue; /auditors=viewer team:red team:green',
      GATEWAY_ROLES_CLAIM: 'realm_access.roles',
    },
    idp: {
      people: [
        {
          sub: 'gina',
          username: 'gina',
          name: 'Gina',
          email: 'g@x.invalid',
          groups: ['support-blue', 'other'],
        },
        { sub: 'hal', username: 'hal', name: 'Hal', email: 'h@x.invalid', groups: ['/auditors'] },
      ],
    },
  })
  const gina = new Browser()
  await signInAt(stack, gina, { username: 'gina' })
  const g = await me(stack, gina)
  assert.deepEqual([g.body.roles, g.body.teams], [['operator'], ['blue']])
  const hal = new Browser()
  await signInAt(stack, hal, { username: 'hal' })
  const h = await me(stack, hal)
  assert.deepEqual([h.body.roles, h.body.teams], [['viewer'], ['red', 'green']])
})

test('someone the IdP signs in but who maps to no role gets a page saying so, and no session', async (t) => {
  const stack = await startSignInStack(t, {
    idp: {
      people: [{ sub: 'nora', username: 'nora', name: 'Nora Nobody', email: 'n@x.invalid', teams: ['blue'] }],
    },
  })
  const browser = new Browser()
  const page = await signInAt(stack, browser, { username: 'nora' })
  assert.equal(page.status, 403)
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/)
  assert.match(page.text, /<h1>You have no role on this gateway<\/h1>/)
  assert.match(page.text, /Nora Nobody \(nora\)/)
  assert.match(page.text, /auth\/login\?prompt=login/, 'offers another account')
  assert.match(page.text, /no_role/)
  assert.equal(browser.cookies.has('krg_session'), false)
  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  assert.deepEqual(
    [record?.sub, record?.status, record?.error, record?.outcome],
    ['nora', 403, 'no_role', 'refused'],
  )
})

test('denied consent is a page with "sign in again" and signin_denied in the audit', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()
  const page = await signInAt(stack, browser, { consent: 'deny' })
  assert.equal(page.status, 403)
  assert.match(page.text, /<h1>Sign-in failed<\/h1>/)
  assert.match(page.text, /You did not let the gateway sign you in/)
  assert.match(page.text, /href="\/auth\/login">Sign in again</)
  assert.equal(browser.cookies.has('krg_session'), false)
  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  assert.deepEqual([record?.status, record?.error, record?.sub], [403, 'signin_denied', null])
})

test('a callback that is not this browser’s sign-in: unknown state, no binding, replayed, forged error', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()
  const toCallback = await signInAt(stack, browser, { stopAtCallback: true })
  const callback = new URL(toCallback.location ?? '')
  assert.equal(callback.pathname, '/auth/callback')

  // Another browser (no binding cookie) presenting this browser's callback: refused, and it burns the state.
  const thief = new Browser()
  const stolen = await thief.request(callback.href)
  assert.equal(stolen.status, 400)
  assert.match(stolen.text, /started in another browser/)
  assert.match(stolen.text, /signin_state_invalid/)
  // So the real browser cannot use it either: one attempt, one callback.
  const late = await browser.request(callback.href)
  assert.equal(late.status, 400)
  assert.match(late.text, /unknown, expired \(10 minutes\) or used already/)

  const wrong = new URL(callback)
  wrong.searchParams.set('state', 'x'.repeat(43))
  assert.equal((await browser.request(wrong.href)).status, 400)
  // A crafted link with an IdP error and someone's text: the state decides, and the text is never shown.
  const forged = await browser.request(
    `${stack.base}auth/callback?error=access_denied&error_description=Call+555-0100+for+help&state=${'y'.repeat(43)}`,
  )
  assert.equal(forged.status, 400)
  assert.doesNotMatch(forged.text, /555-0100/)

  const codes = (await audit(stack)).filter((r) => r.route === 'auth/callback').map((r) => r.error)
  assert.deepEqual(codes, [
    'signin_state_invalid',
    'signin_state_invalid',
    'signin_state_invalid',
    'signin_state_invalid',
  ])
})

test('a replayed code is refused by the IdP: signin_code_invalid', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()
  const first = await signInAt(stack, browser, { stopAtCallback: true })
  const used = new URL(first.location ?? '')
  assert.equal((await browser.request(used.href)).status, 303)
  // A new sign-in in the same browser (a valid state), but with the old code.
  const second = await browser.request(`${stack.base}auth/login?prompt=login`)
  const state = new URL(second.location ?? '').searchParams.get('state') ?? ''
  used.searchParams.set('state', state)
  const replay = await browser.request(used.href)
  assert.equal(replay.status, 400)
  assert.match(replay.text, /did not accept the sign-in code/)
  const record = (await audit(stack)).find((r) => r.error === 'signin_code_invalid')
  assert.equal(record?.route, 'auth/callback')
})

test('a tampered ID token fails its signature check: signin_token_invalid', async (t) => {
  // A proxy stands where the IdP's issuer is and rewrites the `sub` inside the ID token of the token response.
  const port = await freePort()
  const stack = await startSignInStack(t, { idp: { issuer: `http://127.0.0.1:${port}` } })
  const proxy = await startIdpStandIn(t, port, stack.idp.url, {
    token: (body) => {
      const [header, , signature] = String(body.id_token).split('.')
      const claims = { ...jwtClaims(String(body.id_token)), sub: 'mallory' }
      const payload = Buffer.from(JSON.stringify(claims)).toString('base64url')
      return { ...body, id_token: [header, payload, signature].join('.') }
    },
  })
  const browser = new Browser()
  const page = await signInAt(stack, browser)
  assert.equal(proxy.rewritten.token, 1, 'the token response was tampered with')
  assert.equal(page.status, 400)
  assert.match(page.text, /did not pass the gateway&#39;s checks/)
  assert.match(page.text, /JWT signature verification failed/)
  assert.equal(browser.cookies.has('krg_session'), false)
  assert.equal((await audit(stack)).find((r) => r.route === 'auth/callback')?.error, 'signin_token_invalid')
})

test('the IdP down: a clear page and 503 idp_unavailable, at login and at the callback', async (t) => {
  const nothing = `http://127.0.0.1:${await freePort()}`
  const down = await startSignInStack(t, { issuer: nothing })
  const page = await new Browser().request(`${down.base}auth/login`)
  assert.equal(page.status, 503)
  assert.match(page.text, /<h1>Your identity provider cannot be reached<\/h1>/)
  assert.match(page.text, /idp_unavailable/)

  // Up at login, down by the time the person comes back.
  const stack = await startSignInStack(t)
  const browser = new Browser()
  const toCallback = await signInAt(stack, browser, { stopAtCallback: true })
  await stack.idp.close()
  const callback = await browser.request(toCallback.location ?? '')
  assert.equal(callback.status, 503)
  assert.match(callback.text, /cannot be reached/)
  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  assert.deepEqual([record?.status, record?.error], [503, 'idp_unavailable'])
})
