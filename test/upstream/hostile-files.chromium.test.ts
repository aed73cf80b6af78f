import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { stealingScript } from '../fixtures/hostile-runtime.ts'
import { startHostileStack } from '../fixtures/hostile-stack.ts'
import { launchChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'

/** A 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
)

/** Opens `url`; resolves with what Chromium did with it: rendered it as a page, or started a download. */
async function open(page: Page, url: string): Promise<'rendered' | 'download'> {
  const download = page.waitForEvent('download').then(
    (d) => d,
    () => null,
  )
  const navigated = await page.goto(url, { waitUntil: 'load' }).then(
    () => true,
    // Chromium aborts the navigation of a download ("Download is starting").
    (err: Error) => {
      if (!/download/i.test(err.message)) throw err
      return false
    },
  )
  if (navigated) return 'rendered'
  assert.ok(await download, `${url}: neither a page nor a download`)
  return 'download'
}

test('no file a hostile runtime serves runs script on the gateway origin, even for a signed-in admin', async (t) => {
  // No public origin: the gateway's own origin is the one allowed to write with the cookie, as a script on it
  // would need.
  const { rt, gw } = await startHostileStack(t, { GATEWAY_PUBLIC_ORIGIN: '' })
  const exfil = `${rt.origin}/exfil`
  const script = stealingScript(exfil)
  const html = `<!doctype html><title>file</title><body>evil<script>${script}</script>`
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" onload="${script.replaceAll('"', '&quot;')}">` +
    `<script>${script}</script><rect width="10" height="10"/></svg>`
  const files: Array<[path: string, type: string, body: string | Buffer, expected: 'rendered' | 'download']> =
    [
      ['artifacts/evil.html', 'text/html', html, 'download'],
      ['artifacts/evil.svg', 'image/svg+xml', svg, 'download'],
      ['artifacts/evil.xml', 'application/xhtml+xml', html, 'download'],
      // The runtime claims HTML for files the spec types itself: the gateway's type wins, the page is inert.
      ['artifacts/report.json', 'text/html', html, 'rendered'],
      ['artifacts/notes.txt', 'text/html', html, 'rendered'],
      ['artifacts/screenshots/s1.png', 'text/html', html, 'rendered'],
      ['attachments/a-html', 'text/html', html, 'download'],
      ['attachments/a-svg', 'image/svg+xml', svg, 'download'],
      ['inbox', 'text/html', html, 'rendered'],
      ['messages', 'text/html', html, 'rendered'],
    ]
  for (const [path, type, body] of files) {
    rt.answer(path, { headers: { 'content-type': type, 'content-disposition': 'inline' }, body })
  }
  rt.answer('artifacts/screenshots/real.png', { headers: { 'content-type': 'image/png' }, body: PNG })

  const browser = await launchChromium()
  t.after(() => browser.close())
  const context = await browser.newContext({ acceptDownloads: true })
  const page = await context.newPage()

  // The control: the same HTML from the runtime's own origin does run its script, so the probe works.
  await page.goto(`${rt.url}artifacts/evil.html`)
  assert.equal(await page.title(), 'pwned')
  await waitFor('the control page to report home', () => rt.exfil.length > 0)
  rt.exfil.length = 0

  // An admin of every team signs in; their cookie is what a script on the gateway origin would use.
  const ticket = gw.app.auth.issueLoginTicket({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  await page.goto(`${gw.url}/auth/login?ticket=${ticket}`)
  assert.equal((await context.cookies()).length, 1)

  for (const [path, , , expected] of files) {
    const url = `${gw.url}/desktop/k1/mcp/${path}${path.startsWith('attachments/') ? '?inline=1' : ''}`
    const got = await open(page, url)
    assert.equal(got, expected, path)
    if (got === 'rendered') {
      // Inline script runs while the page parses, before `load`: had it run, the title would say so.
      assert.notEqual(await page.title(), 'pwned', `${path}: script ran on the gateway origin`)
      assert.equal(await page.evaluate('window.origin'), 'null', `${path}: not sandboxed`)
    }
  }
  // An image still shows (the sandbox does not break the image viewer).
  await page.goto(`${gw.url}/desktop/k1/mcp/artifacts/screenshots/real.png`)
  assert.equal(await page.evaluate('document.images[0]?.naturalWidth'), 1)

  // A last control page makes sure any request a hostile page had started has arrived by now.
  await page.goto(`${rt.url}artifacts/evil.html`)
  await waitFor('the last control page to report home', () => rt.exfil.length > 0)
  assert.deepEqual(
    rt.exfil.filter((r) => !r.headers.referer?.startsWith(rt.origin)).map((r) => r.url),
    [],
    'a page on the gateway origin reported home',
  )
  // What came through the gateway carries the messaging token; the control pages' own requests do not.
  const viaGateway = rt.received.filter((r) => r.headers['x-kasm-runtime-session-token'] === rt.token)
  assert.ok(viaGateway.length >= files.length)
  assert.deepEqual(
    viaGateway.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.url}`),
    [],
    'a page on the gateway origin wrote to the inbox',
  )
  const records = await gw.app.audit.recent({ limit: 100 })
  assert.deepEqual(
    records.filter((r) => r.method !== 'GET' && r.route !== 'auth'),
    [],
    'the admin cookie was used for a write',
  )
})
