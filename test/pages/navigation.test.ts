import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyRequest } from 'fastify'
import { request } from 'undici'
import { isBrowserNavigation } from '../../src/pages/navigation.ts'
import { renderPage } from '../../src/pages/page.ts'
import { startGateway } from '../helpers/gateway.ts'

const asRequest = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest
const HTML_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'

test('a navigation is told apart from fetch and programs by fetch metadata, else by Accept', () => {
  const cases: [Record<string, string>, boolean][] = [
    [{ 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document', accept: HTML_ACCEPT }, true],
    [{ 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'iframe' }, true],
    [{ 'sec-fetch-dest': 'document' }, true],
    // A sidebar's fetch asking for HTML is still a fetch: it gets JSON.
    [{ 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty', accept: HTML_ACCEPT }, false],
    [{ 'sec-fetch-mode': 'same-origin', 'sec-fetch-dest': 'empty', accept: 'text/html' }, false],
    [{ 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image', accept: 'image/*' }, false],
    // No fetch metadata: Accept decides.
    [{ accept: HTML_ACCEPT }, true],
    [{ accept: 'text/html' }, true],
    [{ accept: 'application/json, text/html;q=0.5' }, false],
    [{ accept: '*/*' }, false],
    [{ accept: 'text/event-stream' }, false],
    [{}, false],
  ]
  for (const [headers, expected] of cases) {
    assert.equal(isBrowserNavigation(asRequest(headers)), expected, JSON.stringify(headers))
  }
})

test('a page escapes everything it shows and links under the base path', () => {
  const html = renderPage(
    {
      status: 400,
      title: 'A <b>title</b>',
      lead: '"quoted" & <script>alert(1)</script>',
      details: ["it's <img src=x onerror=alert(1)>"],
      actions: [{ label: 'Go <now>', to: 'auth/login?return_to=%2F"onmouseover=x' }],
      code: '<code>',
    },
    '/gateway/',
  )
  assert.doesNotMatch(html, /<script|<img|<b>|"onmouseover/)
  assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/)
  assert.match(html, /href="\/gateway\/auth\/login\?return_to=%2F&quot;onmouseover=x"/)
  assert.match(html, /<link rel="stylesheet" href="\/gateway\/pages\/pages.css">/)
  assert.doesNotMatch(html, /style=|<style/, 'no inline style')
})

test('errors answer a navigation with a page and everything else with the JSON body', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const navigate = { 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document', accept: HTML_ACCEPT }

  // An anonymous navigation to a v1 route: 401 with the sign-in link back to it.
  const page = await request(`${gw.url}/desktop/k1/mcp/artifacts/report.json?x=1`, { headers: navigate })
  const html = await page.body.text()
  assert.equal(page.statusCode, 401)
  assert.match(String(page.headers['content-type']), /^text\/html; charset=utf-8/)
  assert.match(String(page.headers['content-security-policy']), /default-src 'none'/)
  assert.doesNotMatch(String(page.headers['content-security-policy']), /script-src|unsafe-inline/)
  assert.equal(page.headers['x-content-type-options'], 'nosniff')
  assert.equal(page.headers['cache-control'], 'no-store')
  assert.match(html, /<h1>Sign in to continue<\/h1>/)
  assert.match(
    html,
    /href="\/gateway\/auth\/login\?return_to=%2Fdesktop%2Fk1%2Fmcp%2Fartifacts%2Freport\.json%3Fx%3D1"/,
  )
  assert.match(html, /Error code: <code>unauthenticated<\/code>/)

  // The same request from the sidebar's fetch: JSON, no page.
  const fetched = await request(`${gw.url}/desktop/k1/mcp/artifacts/report.json`, {
    headers: { 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty', accept: '*/*' },
  })
  assert.equal(fetched.statusCode, 401)
  assert.deepEqual(await fetched.body.json(), {
    error: 'unauthenticated',
    message: 'no credential: send a bearer token or sign in',
    requestId: fetched.headers['x-request-id'],
  })

  // Not found: a page for a person, JSON for a program.
  const missing = await request(`${gw.url}/gateway/nothing-here`, { headers: navigate })
  assert.equal(missing.statusCode, 404)
  assert.match(await missing.body.text(), /<h1>Not found<\/h1>[\s\S]*route_not_found/)
  const missingJson = await request(`${gw.url}/gateway/nothing-here`)
  assert.equal(((await missingJson.body.json()) as { error: string }).error, 'route_not_found')

  // The stylesheet the pages link to is served under the base path.
  const css = await request(`${gw.url}/gateway/pages/pages.css`)
  assert.equal(css.statusCode, 200)
  assert.match(String(css.headers['content-type']), /^text\/css/)
  assert.match(await css.body.text(), /prefers-color-scheme: dark/)
})
