import assert from 'node:assert/strict'
import { test } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { request } from 'undici'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'

/** The page is only for someone signed in (test/console/admission.test.ts); the assets are for anyone. */
const signedIn = { authorization: `Bearer ${await bearer({ roles: ['viewer'] })}` }

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers })
  const body = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, body }
}

test('the page: one shell for every console URL, strict CSP, no inline script or style, nothing from elsewhere', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const home = await get(`${gw.url}/gateway/`, signedIn)
  assert.equal(home.status, 200)
  const csp = String(home.headers['content-security-policy'])
  for (const directive of [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    // No identity provider: the sign-out form posts here and goes nowhere else.
    "form-action 'self';",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
  ]) {
    assert.ok(csp.includes(directive), directive)
  }
  assert.ok(!csp.includes('unsafe'), 'no unsafe-inline or unsafe-eval')
  assert.equal(home.headers['cache-control'], 'private, no-cache')
  const html = home.body.toString()
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script')
  assert.doesNotMatch(html, /<style|style=/, 'no inline style')
  assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin')
  const session = await get(`${gw.url}/gateway/sessions/k1`, signedIn)
  assert.equal(session.status, 200)
  assert.deepEqual(session.body, home.body, 'a deep link gets the same page')
  const again = await get(`${gw.url}/gateway/`, { ...signedIn, 'if-none-match': String(home.headers.etag) })
  assert.equal(again.status, 304)
  const list = await request(`${gw.url}/gateway/sessions`)
  await list.body.dump()
  assert.equal(list.statusCode, 308)
  assert.equal(list.headers.location, '/gateway/')
})

test('assets: hashed, immutable, brotli or gzip as accepted, with ETags; unknown ones 404', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const html = (await get(`${gw.url}/`, signedIn)).body.toString()
  const names = [...html.matchAll(/(?:src|href)="\/assets\/([^"]+)"/g)].map((m) => m[1] as string)
  assert.equal(names.length, 3, 'a script, a stylesheet and an icon')
  for (const name of names) assert.match(name, /^(?:console|icon)-[A-Z0-9]{8}\.(?:js|css|svg)$/)
  const script = names.find((n) => n.endsWith('.js')) as string
  const url = `${gw.url}/assets/${script}`

  const plain = await get(url)
  assert.equal(plain.status, 200)
  assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8')
  assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable')
  assert.equal(plain.headers['x-content-type-options'], 'nosniff')
  assert.equal(plain.headers.vary, 'accept-encoding')
  assert.equal(plain.headers['content-encoding'], undefined)

  const br = await get(url, { 'accept-encoding': 'gzip, deflate, br' })
  assert.equal(br.headers['content-encoding'], 'br')
  assert.deepEqual(brotliDecompressSync(br.body), plain.body)
  assert.ok(
    br.body.length < plain.body.length / 2.5,
    `brotli: ${br.body.length} of ${plain.body.length} bytes`,
  )
  const gz = await get(url, { 'accept-encoding': 'gzip' })
  assert.equal(gz.headers['content-encoding'], 'gzip')
  assert.deepEqual(gunzipSync(gz.body), plain.body)
  const refused = await get(url, { 'accept-encoding': 'br;q=0, gzip' })
  assert.equal(refused.headers['content-encoding'], 'gzip', 'q=0 refuses an encoding')

  const tags = new Set([plain, br, gz].map((r) => String(r.headers.etag)))
  assert.equal(tags.size, 3, 'each representation has its own ETag')
  const cached = await get(url, { 'accept-encoding': 'br', 'if-none-match': String(br.headers.etag) })
  assert.equal(cached.status, 304)
  assert.equal(cached.body.length, 0)

  const missing = await get(`${gw.url}/assets/console-AAAAAAAA.js`)
  assert.equal(missing.status, 404)
  assert.equal(JSON.parse(missing.body.toString()).error, 'route_not_found')
  const traversal = await get(`${gw.url}/assets/..%2Fconfig.js`)
  assert.equal(traversal.status, 404)
})
