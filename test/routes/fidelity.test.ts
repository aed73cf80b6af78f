import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { openSse, startStack, until } from '../events/helpers.ts'
import { send, startProxy } from '../upstream/support.ts'

/** The simulated runtime behind a gateway (session s1); `call` is an operator of every team, as JSON. */
async function setup(t: TestContext) {
  const { rt, gw, token } = await startStack(t)
  const call = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${gw.url}/desktop/s1/mcp/${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string> | undefined) },
    })
    return { status: res.status, body: (await res.json()) as Record<string, unknown> }
  }
  return { rt, call }
}

test('runs/<run>/messages/<key> finds a message by any key the spec allows (ключ-1, spaces, /, %)', async (t) => {
  const { rt, call } = await setup(t)
  const run = rt.run
  for (const key of ['ключ-1', 'two words', 'a/b/c', '100% sure', 'plus+sign', 'ends-with-dot.']) {
    const sent = await call('messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ run, key, text: `hello ${key}` }),
    })
    assert.equal(sent.status, 202, key)
    const found = await call(`runs/${encodeURIComponent(run)}/messages/${encodeURIComponent(key)}`)
    assert.equal(found.status, 200, `${key}: ${JSON.stringify(found.body)}`)
    assert.equal(found.body.key, key)
    assert.equal(found.body.id, sent.body.id)
  }
  // A key never sent is the runtime's 404, not the gateway's route_not_found.
  const missing = await call(`runs/${encodeURIComponent(run)}/messages/${encodeURIComponent('ключ-2')}`)
  assert.equal(missing.status, 404)
  assert.notEqual(missing.body.error, 'route_not_found')
})

test('a key is percent-encoded upstream exactly once; dot segments are refused', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const cases: Array<[string, string]> = [
    ['%D0%BA%D0%BB%D1%8E%D1%87-1', '%D0%BA%D0%BB%D1%8E%D1%87-1'],
    ['a%20b', 'a%20b'],
    ['a%2Fb', 'a%2Fb'],
    ['100%25', '100%25'],
    ['%2525', '%2525'],
  ]
  for (const [sent, upstream] of cases) {
    const res = await send(gw.url, {
      path: `/desktop/k1/mcp/runs/r1/messages/${sent}`,
      headers: { authorization: auth.operator },
    })
    assert.equal(res.status, 200, sent)
    assert.equal(echo.received.at(-1)?.url, `/base/k1/runs/r1/messages/${upstream}`)
  }
  const before = echo.received.length
  for (const sent of ['%2e%2e', '.', '..%2Finbox', 'a%2F..%2Fb', '%2E', `${'k'.repeat(257)}`]) {
    const res = await send(gw.url, {
      path: `/desktop/k1/mcp/runs/r1/messages/${sent}`,
      headers: { authorization: auth.operator },
    })
    assert.equal(res.status, 404, sent)
    assert.equal(JSON.parse(res.text).error, 'route_not_found')
  }
  assert.equal(echo.received.length, before, 'a refused key never reaches the runtime')
})

test('a stream opens with `: run <id>` at once, also when nothing is to be replayed', async (t) => {
  const { rt, token, eventsUrl } = await startStack(t)
  // A first viewer makes the gateway read the session; its events are the current position.
  const first = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => first.close())
  await until('the run to be read', () => first.events.length >= 1)
  const last = first.events.at(-1)?.id
  assert.ok(last)
  const seq = Number(last.slice(last.lastIndexOf(':') + 1))
  for (const [what, url, headers] of [
    ['after=<current seq>&run=<current run>', `${eventsUrl}?after=${seq}&run=${rt.run}`, {}],
    ['Last-Event-ID at the head', eventsUrl, { 'last-event-id': `${rt.run}:${seq}` }],
  ] as const) {
    const viewer = await openSse(url, { authorization: `Bearer ${token}`, ...headers })
    t.after(() => viewer.close())
    // Nothing is emitted meanwhile: the only thing the stream can carry is its opening line.
    await until(`${what}: the run line`, () => viewer.raw.length > 0)
    assert.equal(viewer.raw.split('\n')[0], `: run ${rt.run}`, what)
    assert.equal(viewer.events.length, 0, what)
    viewer.close()
  }
})
