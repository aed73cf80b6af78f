import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { freePort } from '../cluster/redis-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { Browser, sessionCookie, signInAt, startSignInStack } from '../signin/harness.ts'

/**
 * Who gets the console's page at `<base>` and `<base>sessions/<id>`: someone signed in with a role. A browser
 * navigation by anyone else is sent to sign in and back, or shown the page that says why; a program or a
 * `fetch` gets the JSON error. (The running page's own 401s are in test/console/states.test.ts.)
 */

const NAVIGATE = {
  accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
  'sec-fetch-mode': 'navigate',
  'sec-fetch-dest': 'document',
  'sec-fetch-site': 'none',
}
const FETCH = { accept: '*/*', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }

async function get(url: string, headers: Record<string, string>) {
  const res = await request(url, { headers })
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
}

test('signed out, with an identity provider: a navigation goes to sign in with return_to, a fetch gets 401 JSON', async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_BASE_PATH: '/gateway/' } })
  for (const [path, returnTo] of [
    ['/gateway/', '/gateway/'],
    ['/gateway/sessions/k1', '/gateway/sessions/k1'],
    ['/gateway/sessions/k%201?tab=inbox', '/gateway/sessions/k%201?tab=inbox'],
  ] as const) {
    const res = await get(`${stack.origin}${path}`, NAVIGATE)
    assert.equal(res.status, 303, path)
    const location = new URL(String(res.headers.location), stack.origin)
    assert.equal(location.pathname, '/gateway/auth/login')
    assert.equal(location.searchParams.get('return_to'), returnTo)
    assert.equal(res.headers['cache-control'], 'no-store')
  }
  const fetched = await get(`${stack.base}`, FETCH)
  assert.equal(fetched.status, 401)
  assert.equal(JSON.parse(fetched.text).error, 'unauthenticated')

  // A cookie that was good and is not any more: the same, and the browser is told to drop it.
  const browser = new Browser()
  await signInAt(stack, browser)
  const cookie = sessionCookie(browser)
  const shell = await get(`${stack.base}sessions/k1`, { ...NAVIGATE, cookie })
  assert.equal(shell.status, 200)
  assert.match(shell.text, /<div id="app">/)
  assert.equal(await stack.app.auth.revokeCookieSessions('olivia'), 1)
  const revoked = await get(`${stack.base}sessions/k1`, { ...NAVIGATE, cookie })
  assert.equal(revoked.status, 303)
  assert.equal(
    new URL(String(revoked.headers.location), stack.origin).searchParams.get('return_to'),
    '/gateway/sessions/k1',
  )
  assert.match(String(revoked.headers['set-cookie']), /krg_session=;.*Expires=Thu, 01 Jan 1970/)
  const revokedFetch = await get(`${stack.base}`, { ...FETCH, cookie })
  assert.equal(revokedFetch.status, 401)
  assert.equal(JSON.parse(revokedFetch.text).error, 'invalid_credential')
})

test('signed in without a role: the no-role page for a navigation, 403 no_role for a fetch', async (t) => {
  const stack = await startSignInStack(t)
  // The IdP's sign-in refuses such a person (test/signin/flow.test.ts); a one-time link can still make one.
  const link = stack.app.auth.issueLoginTicket({ sub: 'nemo', name: 'Nemo', roles: [], teams: ['blue'] })
  const browser = new Browser()
  await browser.navigate(`${stack.base}auth/login?ticket=${link}`, (next) => next === stack.base)
  const cookie = sessionCookie(browser)
  const page = await get(stack.base, { ...NAVIGATE, cookie })
  assert.equal(page.status, 403)
  assert.match(page.text, /<h1>You have no role on this gateway<\/h1>/)
  assert.match(page.text, /signed you in as Nemo \(nemo\)/)
  assert.match(page.text, /<code>no_role<\/code>/)
  const fetched = await get(`${stack.base}sessions/k1`, { ...FETCH, cookie })
  assert.equal(fetched.status, 403)
  assert.equal(JSON.parse(fetched.text).error, 'no_role')
})

test('no identity provider: a signed-out navigation gets the sign-in page, never JSON', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const res = await get(`${gw.url}/gateway/sessions/k1`, NAVIGATE)
  assert.equal(res.status, 401)
  assert.match(String(res.headers['content-type']), /^text\/html/)
  assert.match(res.text, /<h1>Sign in to continue<\/h1>/)
  assert.match(res.text, /href="\/gateway\/auth\/login\?return_to=%2Fgateway%2Fsessions%2Fk1"/)
})

test('the CSP lets the sign-out form reach the IdP: its origin from discovery, the issuer’s until discovery answers', async (t) => {
  const stack = await startSignInStack(t)
  const browser = new Browser()
  await signInAt(stack, browser)
  const shell = await get(stack.base, { ...NAVIGATE, cookie: sessionCookie(browser) })
  const policy = String(shell.headers['content-security-policy'])
  assert.match(policy, new RegExp(`form-action 'self' ${new URL(stack.idp.issuer).origin};`))

  // An IdP that never answered (down since the gateway started): nobody signed in through it, but a one-time
  // link's session still gets the issuer's origin for its sign-out.
  const issuer = `http://127.0.0.1:${await freePort()}`
  const down = await startSignInStack(t, { issuer })
  const link = down.app.auth.issueLoginTicket({ sub: 'o', roles: ['operator'], teams: ['*'] })
  const other = new Browser()
  await other.navigate(`${down.base}auth/login?ticket=${link}`, (next) => next === down.base)
  const downShell = await get(down.base, { ...NAVIGATE, cookie: sessionCookie(other) })
  assert.equal(downShell.status, 200)
  assert.match(
    String(downShell.headers['content-security-policy']),
    new RegExp(`form-action 'self' ${issuer};`),
  )
})
