// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { mkdir } from 'node:fs/promises'
import { type TestContext, test } from 'node:test'
import type { BrowserContext, Browser as Chromium, Page } from 'playwright-core'
import { freePort } from '../cluster/redis-harness.ts'
import { assertAccessible, cspRefusals, sharedChromium } from '../helpers/chromium.ts'
import { startGateway } from '../helpers/gateway.ts'
import { signInWithChromium, startSignInStack } from '../signin/harness.ts'

const chromium = sharedChromium()

/**
 * Every page a person can meet on the way in and out, in real Chromium, reached through the real routes:
 * zero axe-core violations, light and dark, readable at 390 px without sideways scrolling, the main action
 * first in keyboard order with a visible focus ring, and nothing refused by the strict CSP (no script, no
 * inline style). Screenshots go to SCREENSHOT_DIR (default /tmp/krg-screenshots/pages) to be looked at.
 */

const SHOTS = `${process.env.SCREENSHOT_DIR ?? '/tmp/krg-screenshots'}/pages`

interface Checked {
  name: string
  status: number
  title: string
}

/** Opens `url` the way a person would get there (`reach`), then checks the page in both schemes and widths. */
async function check(
  browser: Chromium,
  name: string,
  reach: (page: Page) => Promise<number>,
  expect: { status: number; title: string },
): Promise<Checked> {
  for (const scheme of ['light', 'dark'] as const) {
    const mobile = scheme === 'dark'
    const viewport = mobile ? { width: 390, height: 844 } : { width: 1100, height: 700 }
    const context: BrowserContext = await browser.newContext({ viewport, colorScheme: scheme })
    const page = await context.newPage()
    const refused = cspRefusals(page)
    const status = await reach(page)
    assert.equal(status, expect.status, `${name}: status`)
    assert.equal(await page.locator('h1').textContent(), expect.title, `${name}: title`)
    assert.deepEqual(refused, [], `${name}: the CSP refused something`)
    const bg = await page.evaluate('getComputedStyle(document.querySelector("main")).backgroundColor')
    assert.notEqual(bg, 'rgba(0, 0, 0, 0)', `${name}: the stylesheet applies under the CSP`)
    // The main action is the first thing the keyboard reaches, and shows where focus is.
    await page.keyboard.press('Tab')
    if ((await page.locator('a.primary').count()) > 0) {
      assert.equal(
        String(await page.evaluate('document.activeElement?.className')),
        'primary',
        `${name}: first Tab stop`,
      )
      const outline = String(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle'))
      assert.notEqual(outline, 'none', `${name}: visible focus`)
    }
    const overflow = Number(await page.evaluate('document.scrollingElement.scrollWidth - innerWidth'))
    assert.ok(overflow <= 0, `${name} (${viewport.width} px): scrolls sideways by ${overflow} px`)
    await page.screenshot({ path: `${SHOTS}/${name}-${scheme}-${viewport.width}.png`, fullPage: true })
    await assertAccessible(page, `${name} (${scheme})`)
    await context.close()
  }
  return { name, ...expect }
}

test('the human pages, in Chromium: axe-core, dark and light, 390 px, keyboard, strict CSP', async (t: TestContext) => {
  await mkdir(SHOTS, { recursive: true })
  const browser = await chromium(t)
  const base = '/gateway/'
  const stack = await startSignInStack(t, {
    env: { GATEWAY_BASE_PATH: base },
    idp: {
      people: [
        {
          sub: 'olivia',
          username: 'olivia',
          name: 'Olivia Operator',
          email: 'o@x.invalid',
          roles: ['operator'],
        },
        { sub: 'nora', username: 'nora', name: 'Nora Nobody', email: 'n@x.invalid' },
      ],
    },
  })
  const down = await startSignInStack(t, {
    env: { GATEWAY_BASE_PATH: base },
    issuer: `http://127.0.0.1:${await freePort()}`,
  })
  const plain = await startGateway({ GATEWAY_BASE_PATH: base })
  t.after(() => plain.close())
  const goto = async (page: Page, url: string) => (await page.goto(url))?.status() ?? 0

  const checked: Checked[] = []
  checked.push(
    await check(
      browser,
      'sign-in-required',
      (p) => goto(p, `${stack.origin}/desktop/k1/mcp/artifacts/report.json`),
      { status: 401, title: 'Sign in to continue' },
    ),
    await check(browser, 'not-found', (p) => goto(p, `${stack.base}no-such-page`), {
      status: 404,
      title: 'Not found',
    }),
    await check(browser, 'signin-not-configured', (p) => goto(p, `${plain.url}${base}auth/login`), {
      status: 404,
      title: 'Sign-in is not set up',
    }),
    await check(browser, 'idp-unavailable', (p) => goto(p, `${down.base}auth/login`), {
      status: 503,
      title: 'Your identity provider cannot be reached',
    }),
    await check(
      browser,
      'signin-denied',
      (p) => signInWithChromium(p, stack.idp.issuer, `${stack.base}auth/login`, { consent: 'deny' }),
      {
        status: 403,
        title: 'Sign-in failed',
      },
    ),
    await check(
      browser,
      'no-role',
      (p) => signInWithChromium(p, stack.idp.issuer, `${stack.base}auth/login`, { username: 'nora' }),
      {
        status: 403,
        title: 'You have no role on this gateway',
      },
    ),
    await check(browser, 'signed-out', (p) => goto(p, `${stack.base}auth/logged-out`), {
      status: 200,
      title: 'You are signed out',
    }),
  )
  assert.equal(checked.length, 7)
})

test('after an IdP on another site, the signed-in page continues by itself and the Strict cookie goes along', async (t) => {
  // Chromium first, so that it is closed first: servers then close with no browser still connected to them.
  const browser = await chromium(t)
  // localhost and 127.0.0.1 are different sites: the IdP's redirect to the callback is cross-site.
  const idpPort = await freePort()
  const stack = await startSignInStack(t, {
    idp: { issuer: `http://localhost:${idpPort}`, port: idpPort, host: '127.0.0.1' },
  })
  const page = await browser.newPage()
  const cookies: string[] = []
  page.on('request', async (r) => {
    if (r.url() === `${stack.base}auth/me`) cookies.push((await r.allHeaders()).cookie ?? '')
  })
  const status = await signInWithChromium(
    page,
    stack.idp.issuer,
    `${stack.base}auth/login?return_to=%2Fauth%2Fme`,
  )
  // A page, not a redirect that would lose the cookie (its markup is checked in test/signin/flow.test.ts).
  assert.equal(status, 200)
  await page.waitForURL(`${stack.base}auth/me`)
  assert.match((await page.textContent('body')) ?? '', /"sub":"olivia"/)
  assert.match(cookies[0] ?? '', /krg_session=/)
})
