// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page, Request } from 'playwright-core'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { assertAccessible, cspRefusals, sharedChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'
import { PASSWORD, signInWithChromium } from '../signin/harness.ts'
import { addRuntime, signIn, startConsoleGateway, TOKEN } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }
const nora = { sub: 'nora', name: 'Nora', roles: [], teams: [] }

/** The gateway's session cookie of the page's browser. */
async function sessionCookie(page: Page): Promise<string | undefined> {
  return (await page.context().cookies()).find((c) => c.name === 'krg_session')?.value
}

/** The URLs of the page's navigations (document requests), as they happen. */
function navigations(page: Page): string[] {
  const seen: string[] = []
  page.on('request', (r: Request) => {
    if (r.isNavigationRequest()) seen.push(r.url())
  })
  return seen
}

test('signed out: a deep link goes to sign in and back; a revocation in the running page does the same', async (t) => {
  const gw = await startConsoleGateway(t, {
    people: [carol],
    env: { GATEWAY_STREAM_AUTH_RECHECK_MS: '60000' },
  })
  await addRuntime(t, gw, 'k1', 'blue')
  const b = await chromium(t)

  // Signed out, a deep link: off to the IdP through auth/login with the page to come back to.
  const page = await (await b.newContext()).newPage()
  const seen = navigations(page)
  await page.goto(`${gw.url}/sessions/k1`)
  await page.waitForSelector('#username')
  assert.equal(new URL(page.url()).origin, new URL(gw.stack.idp.issuer).origin)
  assert.deepEqual(seen.slice(0, 2), [
    `${gw.url}/sessions/k1`,
    `${gw.url}/auth/login?return_to=%2Fsessions%2Fk1`,
  ])
  await page.fill('#username', 'carol')
  await page.fill('#password', PASSWORD)
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForSelector('#session-title >> text=k1')
  assert.equal(page.url(), `${gw.url}/sessions/k1`)
  const first = await sessionCookie(page)

  // Signed out everywhere by an administrator while the page runs (the periodic recheck is a minute away):
  // the page loads itself again, goes to sign in, and as the IdP still knows the person, comes straight back.
  seen.length = 0
  await gw.app.auth.revokeCookieSessions('carol')
  await waitFor('a new cookie session', async () => {
    const now = await sessionCookie(page)
    return now !== undefined && now !== first
  })
  await page.waitForSelector('#session-title >> text=k1')
  assert.deepEqual(seen.slice(0, 2), [
    `${gw.url}/sessions/k1`,
    `${gw.url}/auth/login?return_to=%2Fsessions%2Fk1`,
  ])
  assert.equal(page.url(), `${gw.url}/sessions/k1`)

  // Signed out at the IdP itself (another tab): its back-channel logout ends the page's streams, and this
  // time the IdP asks who it is.
  const idpTab = await page.context().newPage()
  await idpTab.goto(`${gw.stack.idp.issuer}/session/end`)
  await idpTab.click('button:has-text("Yes, sign me out")')
  await page.waitForSelector('#username')
  assert.equal(new URL(page.url()).origin, new URL(gw.stack.idp.issuer).origin)
})

test('sign out from the console ends the session at the gateway and at the IdP: signing in again asks for credentials', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  await addRuntime(t, gw, 'k1', 'blue')
  const b = await chromium(t)
  const page = await signIn(t, b, gw, carol)
  const refused = cspRefusals(page)
  // The console's forms may go to the gateway and to the IdP's end-session endpoint, nowhere else.
  const shell = await page.request.get(`${gw.url}/`)
  const formAction = /form-action ([^;]+)/.exec(shell.headers()['content-security-policy'] ?? '')?.[1]
  assert.equal(formAction, `'self' ${new URL(gw.stack.idp.issuer).origin}`)

  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.waitForSelector('button:has-text("Yes, sign me out")')
  assert.ok(page.url().startsWith(`${gw.stack.idp.issuer}/session/end`), page.url())
  assert.deepEqual(refused, [], 'the CSP let the sign-out go to the IdP')
  // Signed out at the gateway already, before the IdP is asked.
  assert.equal((await page.request.get(`${gw.url}/auth/me`)).status(), 401)
  assert.equal(await sessionCookie(page), undefined)

  await page.click('button:has-text("Yes, sign me out")')
  await page.waitForURL(`${gw.url}/auth/logged-out`)
  await page.waitForSelector('h1 >> text=You are signed out')
  await page.getByRole('link', { name: 'Sign in again' }).click()
  await page.waitForSelector('#username')
  assert.equal(new URL(page.url()).origin, new URL(gw.stack.idp.issuer).origin, 'the IdP asks again')
})

test('the console’s own states: no role, session gone, runtime not up or refusing its token, a refused action', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol, nora] })
  const rt = await addRuntime(t, gw, 'k1', 'blue', { observeTokenRequired: true })
  rt.emit('info', { run_id: rt.run, agentic: true })
  rt.emit('status', { phase: 'agentic' })
  const b = await chromium(t)

  // Someone the IdP signs in who maps to no role gets the page that says so, and no session.
  const nobody = await (await b.newContext()).newPage()
  const refused = await signInWithChromium(nobody, gw.stack.idp.issuer, `${gw.url}/`, { username: 'nora' })
  assert.equal(refused, 403)
  await nobody.waitForSelector('h1 >> text=You have no role on this gateway')
  assert.equal(await nobody.getAttribute('a.primary', 'href'), '/auth/login?prompt=login')
  // A cookie session without a role can only come from a bearer or the demo's one-time link (the IdP's
  // sign-in refuses one): the console's own no-role answer needs such a cookie.
  const ticket = gw.app.auth.issueLoginTicket({ sub: 'nemo', name: 'Nemo', roles: [], teams: [] })
  await nobody.goto(`${gw.url}/auth/login?ticket=${ticket}`)
  await nobody.waitForSelector('h1 >> text=You have no role on this gateway')
  assert.match((await nobody.textContent('main')) ?? '', /Nemo \(nemo\)/)

  const page = await signIn(t, b, gw, carol, { path: '/sessions/nope' })
  await page.waitForSelector('h1 >> text=Session not found')
  await page.getByRole('link', { name: '← All sessions' }).click()
  await page.waitForSelector('.session-row >> text=k1')
  await page.waitForSelector('.session-row .health-live')
  assert.equal(await page.locator('.empty').isVisible(), false)

  // The runtime goes away, then refuses the gateway's token: the row and the session say so.
  rt.setDown(503)
  rt.dropStreams()
  await page.waitForSelector('.session-row >> text=Unreachable')
  rt.setDown(null)
  await page.waitForSelector('.session-row .health-live')
  rt.rotateTokens({ messagingToken: 'a-token-the-gateway-does-not-hold' })
  rt.dropStreams()
  await page.waitForSelector('.session-row >> text=Token refused')
  await page.click('.session-row >> text=k1')
  await page.waitForSelector('.session-state >> text=Token refused')
  await page.click('#tab-home')
  await page.waitForSelector('dd >> text=an administrator must rotate it')

  // The runtime refuses an action the console offered (its loop went idle without saying): shown at the control.
  const runtimeToken = 'messaging-token-for-overview-tests'
  rt.rotateTokens({ messagingToken: runtimeToken })
  rt.setLoop('idle')
  await page.waitForSelector('.session-state .health-live')
  await page.click('#tab-inbox')
  await page.getByRole('button', { name: 'Stop the agent' }).click()
  await page.getByRole('button', { name: 'Yes, stop the agent' }).click()
  await page.waitForSelector('.controls .form-status.refused >> text=the run is idle')
  assert.equal(
    await page.getByRole('button', { name: 'Stop the agent' }).isEnabled(),
    true,
    'the control is usable again',
  )
})

test('no session yet, then one: the overview says so, then shows it', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const b = await chromium(t)
  const page = await signIn(t, b, gw, carol)
  await page.waitForSelector('.empty >> text=No sessions yet')
  await addRuntime(t, gw, 'k1', 'blue')
  await page.waitForSelector('.session-row >> text=k1')
  assert.equal(await page.locator('.empty').isVisible(), false)
  await page.fill('#filter-text', 'no such thing')
  await page.waitForSelector('.empty >> text=No session matches the filter.')
})

test('a message sent before the page has heard from the run is not sent, says so, and keeps the text; accessible at both widths', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  // Down before the gateway ever reads it: neither the gateway nor the page knows its run. (addRuntime registers
  // a runtime that is up: the gateway could read its run first.)
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN, kasmId: 'k-late' })
  t.after(() => rt.close())
  rt.setDown(503)
  await gw.app.sessions.put({
    kasmId: 'k-late',
    upstream: rt.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  const b = await chromium(t)
  const posted = () => rt.received.filter((r) => r.method === 'POST' && r.url.endsWith('/messages')).length
  let desktop: Page | undefined
  for (const [name, viewport] of [
    ['phone', { width: 390, height: 844 }],
    ['desktop', { width: 1366, height: 800 }],
  ] as const) {
    const page = await signIn(t, b, gw, carol, { path: '/sessions/k-late#inbox', viewport, reuse: true })
    await page.fill('#compose-text', 'Are you there?')
    await page.press('#compose-text', 'Control+Enter')
    await page
      .locator('.compose .form-status.refused')
      .locator(
        'text=Not sent: the run has not connected yet. Your message is kept; send it again in a moment.',
      )
      .waitFor()
    assert.equal(await page.inputValue('#compose-text'), 'Are you there?', 'the text is kept')
    await assertAccessible(page, `the message box before the run, ${name}`)
    if (process.env.SCREENSHOTS !== undefined)
      await page.screenshot({ path: `${process.env.SCREENSHOTS}/not-sent-before-the-run-${name}.png` })
    if (name === 'desktop') desktop = page
    else await page.context().close()
  }
  assert.equal(posted(), 0, 'nothing reached the runtime')

  // The runtime comes up: the page learns the run, and the same keys send it.
  assert.ok(desktop)
  rt.setDown(null)
  await desktop.waitForSelector('.session-state .health-live')
  await desktop.press('#compose-text', 'Control+Enter')
  await desktop.locator('.compose .form-status >> text=Sent.').waitFor()
  assert.equal(posted(), 1)
  await desktop
    .locator('.message', { hasText: 'Are you there?' })
    .locator('.who >> text=You (Carol)')
    .waitFor()
})
