import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { addRuntimeSession, openSse, TOKEN } from '../events/helpers.ts'
import { Browser, sessionCookie, signInAt, startSignInStack } from './harness.ts'

/**
 * The runtime's bundled sidebar behind the gateway: it sends whatever `?kasm_runtime_token=` held (nothing, or
 * a placeholder) as X-Kasm-Runtime-Session-Token. The gateway authenticates it by the person's cookie and never
 * forwards the client's value: the runtime only ever sees the messaging token the gateway holds.
 */
test('a sidebar request with a placeholder token: authenticated by the cookie, the placeholder never forwarded', async (t) => {
  const stack = await startSignInStack(t)
  const rt = await addRuntimeSession(t, stack.app, 'k1')
  const browser = new Browser()
  await signInAt(stack, browser)
  const sidebar = {
    cookie: sessionCookie(browser),
    'x-kasm-runtime-session-token': 'placeholder',
    'sec-fetch-site': 'same-origin',
    'sec-fetch-mode': 'cors',
  }

  const inbox = await request(`${stack.origin}/desktop/k1/mcp/inbox`, { headers: sidebar })
  assert.equal(inbox.statusCode, 200)
  const { run } = (await inbox.body.json()) as { run: string }
  const sent = await request(`${stack.origin}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { ...sidebar, 'content-type': 'application/json' },
    body: JSON.stringify({ run, key: 'k-1', text: 'hello from the sidebar' }),
  })
  assert.equal(sent.statusCode, 202, await sent.body.text())
  const stream = await openSse(`${stack.origin}/desktop/k1/mcp/events`, sidebar)
  assert.equal(stream.status, 200)
  stream.close()

  const upstream = rt.received.filter((r) => r.url.startsWith('/inbox') || r.url.startsWith('/messages'))
  assert.ok(upstream.length >= 2)
  for (const r of rt.received) {
    assert.equal(r.headers['x-kasm-runtime-session-token'], TOKEN, `${r.method} ${r.url}`)
    assert.equal(r.headers.cookie, undefined, 'the person’s cookie stays at the gateway')
  }
  assert.ok(!JSON.stringify(rt.received).includes('placeholder'))
})
