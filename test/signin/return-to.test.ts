import assert from 'node:assert/strict'
import { test } from 'node:test'
import { safeReturnTo } from '../../src/auth/return-to.ts'
import { Browser, signInAt, startSignInStack } from './harness.ts'

/** return_to accepts same-origin paths only: the open-redirect classics all land on the console. */

const classics = [
  '//evil.example',
  '//evil.example/path',
  '/\\evil.example',
  '\\\\evil.example',
  '/\t/evil.example',
  '/\n/evil.example',
  '/\r\nLocation: https://evil.example',
  '/%09/evil.example',
  '/%2F%2Fevil.example',
  'https://evil.example',
  'http:/evil.example',
  'javascript:alert(1)',
  'JaVaScRiPt:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  '/..//evil.example',
  '/./\\evil.example',
  `/${'a'.repeat(2048)}`,
  '',
  'evil.example',
]

test('safeReturnTo keeps same-origin paths and refuses everything a browser could read as elsewhere', () => {
  for (const value of classics) {
    const out = safeReturnTo(value, '/gateway/')
    // Percent-encoded forms are harmless paths on this origin; everything else falls back.
    if (out !== '/gateway/') {
      assert.ok(out.startsWith('/') && !out.startsWith('//') && !out.includes('\\'), JSON.stringify(value))
      assert.equal(new URL(out, 'https://kasm.example').origin, 'https://kasm.example', JSON.stringify(value))
    }
  }
  for (const value of [
    '//evil.example',
    '/\\evil.example',
    '/\t/evil.example',
    'https://evil.example',
    '/..//evil.example',
  ])
    assert.equal(safeReturnTo(value, '/gateway/'), '/gateway/', JSON.stringify(value))
  assert.equal(
    safeReturnTo('/%2F%2Fevil.example', '/g/'),
    '/%2F%2Fevil.example',
    'a literal %2F is not a slash',
  )
  assert.equal(
    safeReturnTo('/desktop/k1/vnc/index.html?kasm_runtime_token=x#top', '/'),
    '/desktop/k1/vnc/index.html?kasm_runtime_token=x#top',
  )
  assert.equal(safeReturnTo('/a/../b/ä', '/'), '/b/%C3%A4', 'normalised and encoded for a Location header')
  assert.equal(safeReturnTo(undefined, '/g/'), '/g/')
  assert.equal(safeReturnTo(['/a', '/b'], '/g/'), '/g/')
})

test('auth/login sends every open-redirect classic to the console home, through the IdP and without it', async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_BASE_PATH: '/gateway/' } })
  // Through the whole flow once: the callback's 303 goes to the console.
  const fresh = new Browser()
  await signInAt(stack, fresh, { returnTo: '//evil.example' })
  assert.equal(fresh.visited.at(-1), `${stack.origin}/gateway/`)
  // Signed in, auth/login answers at once: each classic, as the query parser decodes it.
  for (const value of classics) {
    const res = await fresh.request(`${stack.base}auth/login?return_to=${encodeURIComponent(value)}`)
    assert.equal(res.status, 303, JSON.stringify(value))
    const location = new URL(res.location ?? '')
    assert.equal(location.origin, stack.origin, `${JSON.stringify(value)} -> ${res.location}`)
  }
  const raw = await fresh.request(`${stack.base}auth/login?return_to=/%09/evil.example`)
  assert.equal(raw.location, `${stack.origin}/gateway/`, 'a raw %09 decodes to a tab')
  const kept = await fresh.request(`${stack.base}auth/login?return_to=%2Fdesktop%2Fk1%2Fvnc%2Fvnc.html`)
  assert.equal(kept.location, `${stack.origin}/desktop/k1/vnc/vnc.html`)
})
