import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startStack } from '../events/helpers.ts'
import { MESSAGING_TOKEN, send, startProxy } from './support.ts'

/**
 * Only a whole `.` or `..` segment is a traversal: keys, ids and file names that merely start or end with dots
 * (`..0a9`, `.x`, `x..`, `...`) are names the runtime accepts, and reach it exactly as sent, with the token
 * and the query of their route. Sent raw (node:http does not normalise paths).
 */

/** The raw path under `/desktop/k1/mcp/` and the path the runtime must get under `/base/k1/`. */
const FORWARDED: readonly [string, string][] = [
  ['runs/r1/messages/..0a9', 'runs/r1/messages/..0a9'],
  ['runs/r1/messages/..x', 'runs/r1/messages/..x'],
  ['runs/r1/messages/.x', 'runs/r1/messages/.x'],
  ['runs/r1/messages/x..', 'runs/r1/messages/x..'],
  ['runs/r1/messages/...', 'runs/r1/messages/...'],
  // Encoded dots are the same names (the router decodes once; the gateway re-encodes what it forwards).
  ['runs/r1/messages/%2e%2ex', 'runs/r1/messages/..x'],
  ['runs/r1/messages/%2E%2E%2E', 'runs/r1/messages/...'],
  // A key may hold `/`: it travels encoded, and `..` beside it is part of the name, not a segment.
  ['runs/r1/messages/a%2F..b', 'runs/r1/messages/a%2F..b'],
  ['runs/r1/messages/x..%2Fy', 'runs/r1/messages/x..%2Fy'],
  ['runs/..r/messages/k1', 'runs/..r/messages/k1'],
  ['runs/r../messages/..k', 'runs/r../messages/..k'],
  ['messages/..m1', 'messages/..m1'],
  ['messages/.m1', 'messages/.m1'],
  ['requests/q1..', 'requests/q1..'],
  ['attachments/...', 'attachments/...'],
  ['artifacts/report..json', 'artifacts/report..json'],
  ['artifacts/screenshots/step..1.png', 'artifacts/screenshots/step..1.png'],
  ['artifacts/x..', 'artifacts/x..'],
]

/** Whole dot segments, plain or encoded: 404, and nothing reaches the runtime. */
const REFUSED: readonly string[] = [
  'runs/r1/messages/.',
  'runs/r1/messages/..',
  'runs/r1/messages/%2e',
  'runs/r1/messages/%2e%2e',
  'runs/r1/messages/%2E%2e',
  'runs/r1/messages/.%2e',
  'runs/r1/messages/a%2F..%2Fb',
  'runs/r1/messages/..%2Finbox',
  'runs/r1/messages/%2e%2e%2finbox',
  'runs/./messages/k1',
  'runs/%2e%2e/messages/k1',
  'messages/%2e',
  'messages/..',
  'requests/%2e%2e',
  'attachments/.',
  // A dotfile is no run file (the runtime answers 404 too); `..` as a file name is refused the same way.
  'artifacts/..x',
  'artifacts/%2e%2e',
]

test('names that start or end with dots are forwarded exactly; whole dot segments never are', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  for (const [path, upstream] of FORWARDED) {
    const before = echo.received.length
    const res = await send(gw.url, {
      path: `/desktop/k1/mcp/${path}?inline=1&since=2`,
      headers: { authorization: auth.operator },
    })
    assert.equal(res.status, 200, `${path} -> ${res.status} ${res.text}`)
    assert.equal(echo.received.length, before + 1, path)
    const got = echo.received.at(-1)!
    const query = path.startsWith('attachments/') ? '?inline=1' : ''
    assert.equal(got.url, `/base/k1/${upstream}${query}`, path)
    assert.equal(got.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN, path)
    // The gateway's own routing marks never leave the process.
    assert.deepEqual(
      Object.keys(got.headers).filter((h) => h.startsWith('x-krg-')),
      [],
      path,
    )
  }
  const forwarded = echo.received.length
  for (const path of REFUSED) {
    const res = await send(gw.url, {
      path: `/desktop/k1/mcp/${path}`,
      headers: { authorization: auth.operator },
    })
    assert.equal(res.status, 404, `${path} -> ${res.status}`)
    assert.match(JSON.parse(res.text).error, /^route_not_found$/, path)
  }
  assert.equal(echo.received.length, forwarded, 'no refused path reached the runtime')
})

test('a dotted key reaches a trusted upstream exactly; a guarded one still has every connection checked', async (t) => {
  // Only 10/8 is allowed: the admin-registered k1 on 127.0.0.1 is refused at connect, however its path is sent.
  const { gw, echo, auth } = await startProxy(t, { GATEWAY_UPSTREAM_ALLOW: '10.0.0.0/8' })
  await gw.app.sessions.put({
    kasmId: 'k2',
    upstream: `${echo.origin}/file/k2/`,
    team: 'blue',
    messagingToken: MESSAGING_TOKEN,
    source: 'file',
  })
  const trusted = await send(gw.url, {
    path: '/desktop/k2/mcp/runs/r1/messages/..0a9',
    headers: { authorization: auth.operator },
  })
  assert.equal(trusted.status, 200, trusted.text)
  assert.equal(echo.received.at(-1)?.url, '/file/k2/runs/r1/messages/..0a9')
  const before = echo.received.length
  for (const key of ['..0a9', 'k-plain']) {
    const guarded = await send(gw.url, {
      path: `/desktop/k1/mcp/runs/r1/messages/${key}`,
      headers: { authorization: auth.operator },
    })
    assert.equal(guarded.status, 502, `${key}: ${guarded.text}`)
    assert.equal(JSON.parse(guarded.text).error, 'upstream_address_refused', key)
  }
  assert.equal(echo.received.length, before, 'the refused address was never reached')
})

test('a message sent with the key ..0a9 is found again by GET runs/<run>/messages/..0a9 (the simulated runtime)', async (t) => {
  const { rt, gw, token } = await startStack(t)
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  for (const key of ['..0a9', '.x', 'x..', '...']) {
    const sent = await fetch(`${gw.url}/desktop/s1/mcp/messages`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ run: rt.run, key, text: `hello ${key}` }),
    })
    assert.equal(sent.status, 202, await sent.text())
    const got = await send(gw.url, {
      path: `/desktop/s1/mcp/runs/${encodeURIComponent(rt.run)}/messages/${key}`,
      headers: { authorization: `Bearer ${token}` },
    })
    assert.equal(got.status, 200, `${key}: ${got.text}`)
    assert.equal((JSON.parse(got.text) as { key: string }).key, key)
  }
})
