import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { freePort } from '../cluster/redis-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { Browser, type SignInStack, sessionCookie, signedIn, startSignInStack } from '../signin/harness.ts'

/**
 * Who gets the console's page at `<base>` and `<base>sessions/<id>`: someone signed in with a role. A browser
 * navigation by anyone else is sent to sign in and back, or shown the page that says why; a program or a
 * `fetch` gets the JSON error. (The running page's own 401s are in test/console/states.test.ts.)
 */

/** What a page's `fetch` sends: never taken for a navigation. */
async function fetched(url: string, cookie?: string) {
  const res = await request(url, {
    headers: {
      accept: '*/*',
      'sec-fetch-mode': 'cors',
      'sec-fetch-dest': 'empty',
      ...(cookie ? { cookie } : {}),
    },
  })
  return { status: res.statusCode, body: (await res.body.json()) as { error: string } }
}

/** A browser signed in with the demo's one-time link (the only way to a cookie session the IdP would refuse). */
async function linkedIn(
  stack: SignInStack,
  claims: Parameters<SignInStack['app']['auth']['issueLoginTicket']>[0],
) {
  const browser = new Browser()
  const ticket = stack.app.auth.issueLoginTicket(claims)
  await browser.navigate(`${stack.base}auth/login?ticket=${ticket}`, (next) => next === stack.base)
  return browser
}

test('signed out, with an identity provider: a navigation goes to sign in with return_to, a fetch gets 401 JSON', async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_BASE_PATH: '/gateway/' } })
  for (const [path, returnTo] of [
    ['/gateway/', '/gateway/'],
    ['/gateway/sessions/k1', '/gateway/sessions/k1'],
    ['/gateway/sessions/k%201?tab=inbox', '/gateway/sessions/k%201?tab=inbox'],
  ] as const) {
    const visit = await new Browser().request(`${stack.origin}${path}`)
    assert.equal(visit.status, 303, path)
    const location = new URL(visit.location ?? '')
    assert.equal(location.pathname, '/gateway/auth/login')
    assert.equal(location.searchParams.get('return_to'), returnTo)
    assert.equal(visit.headers.get('cache-control'), 'no-store')
  }
  const anonymous = await fetched(stack.base)
  assert.deepEqual([anonymous.status, anonymous.body.error], [401, 'unauthenticated'])

  // A cookie that was good and is not any more: the same, and the browser is told to drop it.
  const { browser, cookie } = await signedIn(stack)
  const shell = await browser.request(`${stack.base}sessions/k1`)
  assert.equal(shell.status, 200)
  assert.match(shell.text, /<div id="app">/)
  assert.equal(await stack.app.auth.revokeCookieSessions('olivia'), 1)
  const revoked = await browser.request(`${stack.base}sessions/k1`)
  assert.equal(revoked.status, 303)
  assert.equal(new URL(revoked.location ?? '').searchParams.get('return_to'), '/gateway/sessions/k1')
  assert.equal(browser.cookies.has('krg_session'), false, 'the refused cookie is cleared')
  const stale = await fetched(stack.base, cookie)
  assert.deepEqual([stale.status, stale.body.error], [401, 'invalid_credential'])
})

test('signed in without a role: the no-role page for a navigation, 403 no_role for a fetch', async (t) => {
  const stack = await startSignInStack(t)
  // The IdP's sign-in refuses such a person (test/signin/flow.test.ts); a one-time link can still make one.
  const browser = await linkedIn(stack, { sub: 'nemo', name: 'Nemo', roles: [], teams: ['blue'] })
  const page = await browser.request(stack.base)
  assert.equal(page.status, 403)
  assert.match(page.text, /<h1>You have no role on this gateway<\/h1>/)
  assert.match(page.text, /signed you in as Nemo \(nemo\)/)
  assert.match(page.text, /<code>no_role<\/code>/)
  const refused = await fetched(`${stack.base}sessions/k1`, sessionCookie(browser))
  assert.deepEqual([refused.status, refused.body.error], [403, 'no_role'])
})

test('no identity provider: a signed-out navigation gets the sign-in page, never JSON', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const visit = await new Browser().request(`${gw.url}/gateway/sessions/k1`)
  assert.equal(visit.status, 401)
  assert.match(visit.headers.get('content-type') ?? '', /^text\/html/)
  assert.match(visit.text, /<h1>Sign in to continue<\/h1>/)
  assert.match(visit.text, /href="\/gateway\/auth\/login\?return_to=%2Fgateway%2Fsessions%2Fk1"/)
})

test('the CSP lets the sign-out form reach the IdP: its origin from discovery, the issuer’s until discovery answers', async (t) => {
  const stack = await startSignInStack(t)
  const { browser } = await signedIn(stack)
  const shell = await browser.request(stack.base)
  const policy = shell.headers.get('content-security-policy') ?? ''
  assert.match(policy, new RegExp(`form-action 'self' ${new URL(stack.idp.issuer).origin};`))

  // An IdP that never answered (down since the gateway started): nobody signed in through it, but a one-time
  // link's session still gets the issuer's origin for its sign-out.
  const issuer = `http://127.0.0.1:${await freePort()}`
  const down = await startSignInStack(t, { issuer })
  const linked = await linkedIn(down, { sub: 'o', roles: ['operator'], teams: ['*'] })
  const downShell = await linked.request(down.base)
  assert.equal(downShell.status, 200)
  assert.match(
    downShell.headers.get('content-security-policy') ?? '',
    new RegExp(`form-action 'self' ${issuer};`),
  )
})
