import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { Browser, CLIENT_ID, signInAt, startSignInStack } from '../signin/harness.ts'
import { Conformance } from './conformance.ts'

/**
 * The sign-in's routes answer what their schemas declare (conformance.ts), on a gateway signing in through the
 * demo's real OpenID provider: the way to the IdP, both answers of the callback, the sign-out, a back-channel
 * logout from the IdP, and the console's pages sending a signed-out navigation to sign in.
 */

const conformance = new Conformance()

test('the sign-in, the sign-out and the back-channel logout answer what they declare', async (t) => {
  const stack = await startSignInStack(t, { app: { onRoute: conformance.hook() } })
  const statuses: Record<string, number> = {}

  // Signed out, the console's pages send a navigation to sign in.
  const signedOut = new Browser()
  for (const page of ['', 'sessions/k1', 'report'])
    statuses[`/${page} signed out`] = (await signedOut.request(`${stack.base}${page}`)).status

  // To the IdP (302), and back: the callback redirects to `return_to` (303).
  const browser = new Browser()
  const toCallback = await signInAt(stack, browser, { stopAtCallback: true, returnTo: '/report' })
  assert.ok(browser.visited.some((url) => url.startsWith(`${stack.base}auth/login`)))
  const back = await browser.request(toCallback.location ?? '')
  statuses.callback = back.status
  assert.equal(back.location, `${stack.origin}/report`)
  // Signed in already: no need to bother the IdP.
  statuses['login signed in'] = (await browser.request(`${stack.base}auth/login`)).status
  // After an IdP on another site, a page that continues by itself.
  const crossSite = new Browser()
  const toCallbackAgain = await signInAt(stack, crossSite, { stopAtCallback: true, username: 'victor' })
  crossSite.site = 'cross-site'
  statuses['callback cross-site'] = (await crossSite.request(toCallbackAgain.location ?? '')).status
  // Signing out here, and at the IdP.
  const out = await browser.request(`${stack.base}auth/logout`, { method: 'POST', form: {} })
  statuses.logout = out.status
  assert.ok(out.location?.startsWith(stack.idp.issuer), out.location ?? '')

  // The IdP ends Victor's sessions (a logout token signed with its key), once.
  const iat = Math.floor(Date.now() / 1000)
  const token = await stack.idp.sign(
    {
      iss: stack.idp.issuer,
      aud: CLIENT_ID,
      iat,
      exp: iat + 120,
      jti: randomBytes(12).toString('base64url'),
      sub: 'victor',
      events: { 'http://schemas.openid.net/event/backchannel-logout': {} },
    },
    { typ: 'logout+jwt' },
  )
  const backchannel = async () => {
    const res = await fetch(`${stack.base}auth/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }).toString(),
    })
    return { status: res.status, body: (await res.json()) as Record<string, unknown> }
  }
  const ended = await backchannel()
  assert.deepEqual(ended.body, { ended: 1 })
  statuses.backchannel = ended.status
  statuses['backchannel replayed'] = (await backchannel()).status

  assert.deepEqual(statuses, {
    '/ signed out': 303,
    '/sessions/k1 signed out': 303,
    '/report signed out': 303,
    callback: 303,
    'login signed in': 303,
    'callback cross-site': 200,
    logout: 303,
    backchannel: 200,
    'backchannel replayed': 400,
  })
  conformance.assertConformant('signin')
})
