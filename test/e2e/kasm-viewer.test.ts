import assert from 'node:assert/strict'
import { mkdir } from 'node:fs/promises'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { gatewayClient, startDemoIdp } from '../../src/dev/demo-idp.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { addRuntimeSession, TOKEN } from '../events/helpers.ts'
import { recordTraffic, sharedChromium } from '../helpers/chromium.ts'
import { testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { signInWithChromium } from '../signin/harness.ts'
import { startKasmHost } from './kasm-host.ts'

const chromium = sharedChromium()

/**
 * The whole thing as a team runs it on Kasm's host, in real Chromium: one origin (nginx with the shipped
 * recipe) serves a stand-in Kasm viewer with KasmVNC's headers and its sidebar, the gateway at
 * /desktop/<id>/mcp/ and at its base path /gateway/, and the identity provider. The person signs in through the
 * IdP, opens the viewer, sees the run's events in the sidebar and sends a message that reaches the runtime
 * with the messaging token, while nothing in the browser ever sees that token.
 */

const PASSWORD = 'kasm-e2e-password'
const SHOTS = process.env.SCREENSHOT_DIR ?? '/tmp/krg-screenshots'

test('signed in once on Kasm’s host, the bundled-style sidebar in the viewer works behind the gateway', async (t) => {
  const [hostPort, gatewayPort] = [await freePort(), await freePort()]
  const origin = `http://127.0.0.1:${hostPort}`
  const idp = await startDemoIdp({ issuer: `${origin}/idp`, password: PASSWORD })
  t.after(() => idp.close())
  const config = loadConfig(
    testEnv({
      GATEWAY_BASE_PATH: '/gateway/',
      GATEWAY_PUBLIC_ORIGIN: origin,
      GATEWAY_TRUST_PROXY: '127.0.0.1',
      GATEWAY_OIDC_ISSUER: `${origin}/idp`,
      GATEWAY_OIDC_CLIENT_ID: 'kasm-runtime-gateway',
      GATEWAY_OIDC_CLIENT_SECRET: 'e2e-client-secret',
    }),
  )
  const app = await buildApp(config)
  await app.listen({ port: gatewayPort, host: '127.0.0.1' })
  t.after(() => app.close())
  idp.setClient(gatewayClient(`${origin}/gateway/`, 'kasm-runtime-gateway', 'e2e-client-secret'))
  const runtime = await addRuntimeSession(t, app, 'k1', { kasmId: 'k1', pingIntervalMs: 15_000 })
  await addRuntimeSession(t, app, 'k2', { kasmId: 'k2', pingIntervalMs: 15_000 })
  await startKasmHost(t, { port: hostPort, gatewayPort, idpPort: Number(new URL(idp.url).port) })

  const browser = await chromium(t)
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } })
  const page = await context.newPage()
  const seen = recordTraffic(context)

  // Before signing in: the viewer's sidebar waits (401), and a navigation to a gateway route offers sign-in.
  const viewerUrl = `${origin}/desktop/k1/vnc/index.html?kasm_runtime_token=placeholder`
  const viewerResponse = await page.goto(viewerUrl)
  assert.equal(viewerResponse?.headers()['cross-origin-embedder-policy'], 'require-corp')
  assert.equal(viewerResponse?.headers()['cross-origin-opener-policy'], 'same-origin')
  await page.waitForSelector('#status:has-text("waiting (401)")')
  await page.goto(`${origin}/desktop/k1/mcp/artifacts/report.json`)
  await page.waitForSelector('h1:has-text("Sign in to continue")')
  const signInHref = await page.getAttribute('a.primary', 'href')
  assert.equal(signInHref, '/gateway/auth/login?return_to=%2Fdesktop%2Fk1%2Fmcp%2Fartifacts%2Freport.json')

  // The person signs in once, through the IdP on this host, coming back to the viewer.
  const viewerPath = new URL(viewerUrl).pathname + new URL(viewerUrl).search
  const signedIn = await signInWithChromium(
    page,
    `${origin}/idp`,
    `${origin}/gateway/auth/login?return_to=${encodeURIComponent(viewerPath)}`,
    { password: PASSWORD },
  )
  assert.equal(signedIn, 303)
  await page.waitForURL(viewerUrl)

  // The sidebar goes live and shows the run's events.
  await page.waitForSelector('#status:has-text("live")')
  runtime.emit('log', { level: 'info', msg: 'the run says hello' })
  await page.waitForSelector('#events li:has-text("the run says hello")')

  // A message from the sidebar reaches the runtime, sent with the messaging token the gateway holds.
  await page.fill('#text', 'please take the second record')
  await page.click('#compose button[type=submit]')
  await page.waitForSelector('#sent:has-text("sent")')
  const posted = runtime.received.filter((r) => r.method === 'POST' && r.url === '/messages')
  assert.equal(posted.length, 1)
  assert.equal(posted[0]?.headers['x-kasm-runtime-session-token'], TOKEN)
  await waitFor('the message event', () =>
    page.locator('#events li:has-text("please take the second record")').count(),
  )

  await mkdir(SHOTS, { recursive: true })
  await page.screenshot({ path: `${SHOTS}/kasm-viewer-sidebar.png` })

  // Every other viewer opened on this host has a working sidebar too: the cookie is on the host.
  const other = await context.newPage()
  await other.goto(`${origin}/desktop/k2/vnc/index.html`)
  await other.waitForSelector('#status:has-text("live")')

  // Nothing the browser saw or holds carries the messaging token.
  const storage = String(
    await page.evaluate('JSON.stringify({ ...localStorage, ...sessionStorage }) + document.cookie'),
  )
  const cookies = JSON.stringify(await context.cookies())
  const dom = (await page.content()) + (await other.content())
  for (const [where, text] of [
    ['traffic', seen.join('\n')],
    ['storage', storage],
    ['cookies', cookies],
    ['dom', dom],
  ] as const)
    assert.ok(!text.includes(TOKEN), `the messaging token appeared in ${where}`)
  assert.ok(
    seen.some((s) => s.includes('placeholder')),
    'the sidebar did send its placeholder',
  )
  assert.ok(!JSON.stringify(runtime.received).includes('placeholder'), 'which never reached the runtime')
  // The session cookie is HttpOnly (the page's script cannot read it) and SameSite=Strict.
  const session = (await context.cookies()).find((c) => c.name === 'krg_session')
  assert.equal(session?.httpOnly, true)
  assert.equal(session?.sameSite, 'Strict')
  assert.equal(session?.path, '/')
})
