import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { addRuntime, signIn, startConsoleGateway, until } from '../console/helpers.ts'
import { sharedChromium } from '../helpers/chromium.ts'
import { Browser, PASSWORD, signInWithChromium } from './harness.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

test('another host of the gateway is sent to the sign-in origin before sign-in starts, and the deep link survives', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  const q = rt.ask({ title: 'Which?', fields: [{ id: 'x', type: 'string', required: true, label: 'Which' }] })
  const other = gw.url.replace('127.0.0.1', 'localhost')
  const deepLink = `/sessions/k1?request=${q.request_id}`

  // The binding cookie would be set on localhost and the IdP returns to 127.0.0.1: moved first, query kept.
  const login = await new Browser().request(`${other}/auth/login?return_to=${encodeURIComponent(deepLink)}`)
  assert.equal(login.status, 303)
  assert.equal(login.location, `${gw.url}/auth/login?return_to=${encodeURIComponent(deepLink)}&moved=1`)
  // Once moved, never again (a proxy that rewrites Host cannot make a loop of it).
  const moved = await new Browser().request(`${other}/auth/login?moved=1`)
  assert.equal(moved.status, 302)
  assert.ok(moved.location?.startsWith(gw.stack.idp.issuer), moved.location ?? '')
  // The right host goes straight to the IdP.
  assert.equal((await new Browser().request(`${gw.url}/auth/login`)).status, 302)

  const b = await chromium(t)
  const page = await (await b.newContext()).newPage()
  const status = await signInWithChromium(page, gw.stack.idp.issuer, `${other}${deepLink}`, {
    username: 'carol',
  })
  assert.equal(status, 303, 'signed in, not signin_state_invalid')
  await page.waitForURL(`${gw.url}${deepLink}`)
  await page.waitForSelector('#session-title >> text=k1')
})

test('a failed sign-in says so once and "Sign in again" goes back to where the person was going', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  await addRuntime(t, gw, 'k1', 'blue')
  const b = await chromium(t)
  for (const viewport of [
    { width: 1366, height: 800 },
    { width: 390, height: 844 },
  ]) {
    const page = await (await b.newContext({ viewport })).newPage()
    const status = await signInWithChromium(page, gw.stack.idp.issuer, `${gw.url}/sessions/k1?request=q7`, {
      username: 'carol',
      consent: 'deny',
    })
    assert.equal(status, 403)
    await page.waitForSelector('h1 >> text=Sign-in failed')
    const paragraphs = await page.locator('main > p:not(.code)').allTextContents()
    assert.deepEqual(paragraphs, ['You did not let the gateway sign you in at your identity provider.'])
    const again = page.getByRole('link', { name: 'Sign in again' })
    assert.equal(
      await again.getAttribute('href'),
      `/auth/login?return_to=${encodeURIComponent('/sessions/k1?request=q7')}`,
    )
    await again.click()
    await page.click('button:has-text("Allow")')
    await page.waitForURL(`${gw.url}/sessions/k1?request=q7`)
    await page.waitForSelector('#session-title >> text=k1')
    await page.context().close()
  }
})

/** Opens the console on k1 in another tab of the same browser. */
async function secondTab(page: Page, url: string): Promise<Page> {
  const tab = await page.context().newPage()
  await tab.goto(`${url}/sessions/k1`)
  await tab.waitForSelector('#session-title >> text=k1')
  return tab
}

test('after a sign-out the next sign-in asks for the password, whatever the IdP was told; a second tab leaves at once', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  await addRuntime(t, gw, 'k1', 'blue')
  const b = await chromium(t)
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k1' })
  const tab = await secondTab(page, gw.url)
  await until(tab, "document.querySelector('.session-state .health-live') !== null")
  // What the tab asks for, in the order it asks.
  const asked: string[] = []
  const left = new Promise<number>((resolve) =>
    tab.on('request', (r) => {
      if (r.isNavigationRequest()) resolve(Date.now())
      else asked.push(new URL(r.url()).pathname)
    }),
  )
  const clicked = Date.now()
  await page.getByRole('button', { name: 'Sign out' }).click()
  const leftAfter = (await left) - clicked
  t.diagnostic(`the second tab left the session view ${leftAfter} ms after the sign-out`)
  // At once: its ended streams ask whether the person is still signed in, rather than reconnecting after their
  // backoff (a second) to learn it. The order of the asks says so however slow the machine.
  const me = asked.findIndex((p) => p.endsWith('/auth/me'))
  const reconnect = asked.findIndex((p) => /\/(events|overview)$/.test(p))
  assert.ok(me !== -1 && (reconnect === -1 || me < reconnect), `asked for ${asked.join(', ')}`)

  // The IdP asks whether to sign out there too: the person says no, and is back on the gateway's page.
  await page.waitForSelector('text=You are signed out of the support console.')
  await page.click('button:has-text("No, stay signed in")')
  await page.waitForURL(`${gw.url}/auth/logged-out`)
  await page.waitForSelector('text=the next sign-in from this browser asks for your password')
  const authorize = page.waitForRequest((r) => r.url().startsWith(`${gw.stack.idp.issuer}/auth`))
  await page.getByRole('link', { name: 'Sign in again' }).click()
  assert.equal(new URL((await authorize).url()).searchParams.get('prompt'), 'login')
  await page.waitForSelector('#username')
  await page.fill('#username', 'carol')
  await page.fill('#password', PASSWORD)
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Sign in")')])
  // "No" at the IdP still ended this client's grant there: it asks to allow access again.
  if ((await page.locator('button:has-text("Allow")').count()) > 0)
    await page.click('button:has-text("Allow")')
  await page.waitForURL(`${gw.url}/`)
  // Signed in again: the sign-out is spent, the next sign-in is an ordinary one.
  const cookies = await page.context().cookies(gw.url)
  assert.equal(
    cookies.find((c) => c.name === 'krg_signed_out'),
    undefined,
  )
})
