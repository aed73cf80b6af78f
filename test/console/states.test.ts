import assert from 'node:assert/strict'
import { test } from 'node:test'
import { addRuntime, browser, signIn, startConsoleGateway } from './helpers.ts'

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

test('signed out, or signed out meanwhile: the console sends the person to sign in and back to the same page', async (t) => {
  const gw = await startConsoleGateway(t)
  await addRuntime(t, gw, 'k1', 'blue')
  const b = await browser(t)

  const anonymous = await b.newPage()
  await anonymous.goto(`${gw.url}/sessions/k1`)
  await anonymous.waitForURL(/\/auth\/login\?return_to=/)
  assert.equal(new URL(anonymous.url()).searchParams.get('return_to'), '/sessions/k1')

  const page = await signIn(t, b, gw, carol, { path: '/sessions/k1' })
  await page.waitForSelector('#session-title >> text=k1')
  await gw.app.auth.revokeCookieSessions('carol')
  // The overview's stream is ended at its credential check; its reconnect is refused: off to sign in.
  await page.waitForURL(/\/auth\/login\?return_to=/, { timeout: 10_000 })
  assert.equal(new URL(page.url()).searchParams.get('return_to'), '/sessions/k1')
})

test('the console’s own states: no role, session gone, runtime not up or refusing its token, a refused action', async (t) => {
  const gw = await startConsoleGateway(t)
  const rt = await addRuntime(t, gw, 'k1', 'blue', { observeTokenRequired: true })
  rt.emit('info', { run_id: rt.run, agentic: true })
  rt.emit('status', { phase: 'agentic' })
  const b = await browser(t)

  const nobody = await signIn(t, b, gw, { sub: 'nemo', name: 'Nemo', roles: [], teams: [] })
  await nobody.waitForSelector('h1 >> text=You have no role here')
  await nobody.getByRole('button', { name: 'Sign out' }).click()
  await nobody.waitForSelector('h1 >> text=Signed out')

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
  await page.waitForSelector('.controls .form-status.refused >> text=the run is idle')
  assert.equal(
    await page.getByRole('button', { name: 'Stop the agent' }).isEnabled(),
    true,
    'the control is usable again',
  )
})

test('no session yet, then one: the overview says so, then shows it', async (t) => {
  const gw = await startConsoleGateway(t)
  const b = await browser(t)
  const page = await signIn(t, b, gw, carol)
  await page.waitForSelector('.empty >> text=No sessions yet')
  await addRuntime(t, gw, 'k1', 'blue')
  await page.waitForSelector('.session-row >> text=k1')
  assert.equal(await page.locator('.empty').isVisible(), false)
  await page.fill('#filter-text', 'no such thing')
  await page.waitForSelector('.empty >> text=No session matches the filter.')
})
