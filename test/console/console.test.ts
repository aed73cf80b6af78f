import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { launchChromium } from '../helpers/chromium.ts'
import { startGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const TOKEN = 'console-test-messaging-token-0123456789'

test('an operator signs in with a one-time link, watches the run and sends a message; the browser never holds the token', async (t) => {
  const runtime = await startSimulatedRuntime({
    messagingToken: TOKEN,
    sessionToken: 'session-token-xyz',
    pingIntervalMs: 1000,
  })
  t.after(() => runtime.close())
  const gateway = await startGateway({ GATEWAY_PUBLIC_ORIGIN: '' })
  t.after(() => gateway.close())
  await gateway.app.sessions.put({
    kasmId: 'k1',
    upstream: runtime.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  const ticket = gateway.app.auth.issueLoginTicket({
    sub: 'carol',
    name: 'Carol',
    roles: ['operator'],
    teams: ['blue'],
  })

  const browser = await launchChromium()
  t.after(() => browser.close())
  const page = await browser.newPage()
  const seen: string[] = []
  page.on('request', (request) => {
    seen.push(request.url())
  })
  page.on('response', (response) => {
    seen.push(JSON.stringify(response.headers()))
    // SSE bodies never end; read only finite ones. A page closing under a read is not a failure here.
    if (!response.headers()['content-type']?.includes('event-stream')) {
      response.text().then(
        (body) => seen.push(body),
        () => {},
      )
    }
  })

  await page.goto(`${gateway.url}/auth/login?ticket=${ticket}`)
  await page.waitForSelector('text=Carol (operator)')
  await page.waitForSelector('#sessions li:has-text("k1")')
  // The only session opens by itself; the runtime's events reach the timeline through the gateway.
  await waitFor('the gateway to open the upstream stream', () => runtime.openEventStreams === 1)
  runtime.emit('log', { level: 'info', msg: 'hello from the run' })
  await page.waitForSelector('#timeline li:has-text("hello from the run")')

  await page.fill('#text', 'please pick the second record')
  await page.click('#compose button[type=submit]')
  await page.waitForSelector('#status:has-text("sent")')
  const post = await waitFor('the message to reach the runtime', () =>
    runtime.received.find((r) => r.method === 'POST' && r.url.startsWith('/messages')),
  )
  assert.equal(post.headers['x-kasm-runtime-session-token'], TOKEN)
  assert.equal(post.headers.cookie, undefined)

  const cookies = await page.context().cookies()
  assert.equal(cookies.length, 1)
  assert.equal(cookies[0]?.httpOnly, true)
  assert.equal(cookies[0]?.sameSite, 'Strict')
  for (const text of [...seen, ...cookies.map((c) => c.value), await page.content()]) {
    assert.ok(!text.includes(TOKEN), 'the messaging token reached the browser')
  }

  // A used ticket signs nobody in.
  const again = await fetch(`${gateway.url}/auth/login?ticket=${ticket}`, { redirect: 'manual' })
  assert.equal(again.status, 401)
})

test('without a cookie the console asks the person to sign in, and its page forbids foreign script', async (t) => {
  const gateway = await startGateway()
  t.after(() => gateway.close())
  const browser = await launchChromium()
  t.after(() => browser.close())
  const page = await browser.newPage()
  const response = await page.goto(`${gateway.url}/`)
  assert.match(response?.headers()['content-security-policy'] ?? '', /script-src 'self'/)
  await page.waitForSelector('#signin:not([hidden])')
})
