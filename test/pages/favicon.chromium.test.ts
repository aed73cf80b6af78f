// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import type { ServerResponse } from 'node:http'
import { test } from 'node:test'
import { request } from 'undici'
import { FAVICON_ICO, FAVICON_SIZE, ICON_SVG, icoOf, renderSvg } from '../../scripts/favicon.ts'
import { startDemoIdp } from '../../src/dev/demo-idp.ts'
import { sharedChromium } from '../helpers/chromium.ts'
import { startGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { signInWithChromium, startSignInStack } from '../signin/harness.ts'

// The full browser: the headless shell never fetches a page's icon.
const chromium = sharedChromium('browser')

/** GETs `url` and returns its status, content type and body. */
async function get(url: string): Promise<{ status: number; type: string; body: Buffer }> {
  const res = await request(url)
  return {
    status: res.statusCode,
    type: String(res.headers['content-type']),
    body: Buffer.from(await res.body.arrayBuffer()),
  }
}

test('favicon.ico answers an image: the gateway (at its base path) and the demo identity provider', async (t) => {
  const ico = await readFile(FAVICON_ICO)
  for (const basePath of ['/', '/gw/']) {
    const gw = await startGateway({ GATEWAY_BASE_PATH: basePath })
    t.after(() => gw.close())
    const icon = await get(`${gw.url}${basePath}favicon.ico`)
    assert.deepEqual([icon.status, icon.type], [200, 'image/x-icon'], basePath)
    assert.deepEqual(icon.body, ico)
  }
  const idp = await startDemoIdp()
  t.after(() => idp.close())
  for (const name of ['favicon.ico', 'favicon.svg']) {
    const icon = await get(`${idp.url}/${name}`)
    assert.deepEqual([icon.status, icon.type], [200, 'image/svg+xml'], name)
    assert.match(icon.body.toString(), /^<svg [^>]*viewBox="0 0 32 32"/)
  }
})

test('the way in, in Chromium: no console error (no icon missing), on the gateway and the identity provider', async (t) => {
  const stack = await startSignInStack(t)
  // What Chromium's icon requests got: they are the browser's own, not the page's, so the server sees them.
  const icons: Array<{ url: string; status: number }> = []
  stack.app.server.on('request', (req, res: ServerResponse) => {
    if (!req.url?.includes('favicon')) return
    res.once('finish', () => icons.push({ url: req.url ?? '', status: res.statusCode }))
  })
  const browser = await chromium(t)
  const page = await (await browser.newContext()).newPage()
  const errors: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`)
  })
  // A page of the gateway's own (signed out), then the sign-in through the IdP's form and consent page.
  await page.goto(`${stack.base}auth/logged-out`)
  await waitFor('the gateway icon fetched', () => icons.length > 0)
  assert.deepEqual(icons[0], { url: '/favicon.ico', status: 200 })
  assert.equal(await signInWithChromium(page, stack.idp.issuer, stack.base), 303)
  await page.waitForLoadState('load')
  assert.deepEqual(errors, [])

  // What was fetched is an image Chromium draws (decoded at its own origin): the gateway's 32 pixels wide.
  const widths: number[] = []
  for (const url of [`${stack.base}favicon.ico`, `${stack.idp.url}/favicon.ico`]) {
    await page.goto(url)
    const decode = `(async () => { const img = new Image(); img.src = ${JSON.stringify(url)}; await img.decode(); return img.naturalWidth })()`
    widths.push((await page.evaluate(decode)) as number)
  }
  assert.equal(widths[0], FAVICON_SIZE)
  assert.ok((widths[1] ?? 0) > 0, 'the IdP icon is drawn')
})

test("the gateway's favicon.ico is the console's icon.svg as Chromium draws it (`npm run favicon` renews it)", async (t) => {
  const browser = await chromium(t)
  const fresh = icoOf(await renderSvg(browser, await readFile(ICON_SVG), FAVICON_SIZE), FAVICON_SIZE)
  const committed = await readFile(FAVICON_ICO)
  // Pixels, not bytes: another Chromium may smooth an edge differently, but a changed colour or shape differs
  // by far more than this.
  const page = await browser.newPage()
  const worst = await page.evaluate(
    `(async () => {
      const pixels = async (bytes) => {
        const img = new Image()
        img.src = 'data:image/x-icon;base64,' + bytes
        await img.decode()
        const canvas = document.createElement('canvas')
        canvas.width = canvas.height = ${FAVICON_SIZE}
        const g = canvas.getContext('2d')
        g.drawImage(img, 0, 0, ${FAVICON_SIZE}, ${FAVICON_SIZE})
        return g.getImageData(0, 0, ${FAVICON_SIZE}, ${FAVICON_SIZE}).data
      }
      const a = await pixels(${JSON.stringify(fresh.toString('base64'))})
      const b = await pixels(${JSON.stringify(committed.toString('base64'))})
      let worst = 0
      for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]))
      return worst
    })()`,
  )
  assert.ok(typeof worst === 'number' && worst <= 64, `a pixel differs by ${worst}: run \`npm run favicon\``)
})
