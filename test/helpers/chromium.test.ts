import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { type ChromiumBuild, chromiumFor, sharedChromium } from './chromium.ts'
import { waitFor } from './wait.ts'

const chromium = sharedChromium()

// Tests reload the gateway with process.emit('SIGHUP'); in a shard's process a later file's Chromium test must
// still find the browser the earlier files shared.
test('the shared Chromium outlives a SIGHUP to the test process', async (t) => {
  const browser = await chromium(t)
  const closed = new Promise<boolean>((resolve) => browser.once('disconnected', () => resolve(true)))
  process.emit('SIGHUP', 'SIGHUP')
  // A page made and loaded after the signal: the browser still answers, and has not begun to close.
  const page = await browser.newPage()
  await page.setContent('<p>still here</p>')
  assert.equal(await page.textContent('p'), 'still here')
  assert.equal(browser.isConnected(), true)
  assert.equal(await Promise.race([closed, Promise.resolve(false)]), false)
})

// Why a test about notifications or icons asks for the full browser: the two builds differ there, and only there
// as far as the suite goes. Should a Debian update change that, this says so before a console test does.
test("the full browser offers notifications and fetches a page's icon; the headless shell does neither", async (t) => {
  const icons: string[] = []
  const server = createServer((req, res) => {
    if (req.url === '/favicon.ico') icons.push(req.headers['user-agent'] ?? '')
    res.end('<!doctype html><title>t</title><p>page')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
  const seen: Record<ChromiumBuild, unknown> = { shell: undefined, browser: undefined }
  // The shell first: an icon it fetched would be in `icons` before the browser's.
  for (const build of ['shell', 'browser'] as const) {
    const browser = await chromiumFor(t, build)
    const page = await browser.newPage()
    await page.goto(url)
    // The icon is the browser's own request, not the page's: the server sees it.
    if (build === 'browser') await waitFor('the full browser to fetch the icon', () => icons.length > 0)
    seen[build] = await page.evaluate('Notification.permission')
    await browser.close()
  }
  assert.deepEqual(seen, { shell: 'denied', browser: 'default' })
  assert.equal(icons.length, 1, 'only the full browser asked for the icon')
})
