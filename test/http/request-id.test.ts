import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { INCOMING_REQUEST_ID, newRequestId } from '../../src/http/request-id.ts'
import { bearer } from '../helpers/jwt.ts'
import { gatewayWithRuntime } from '../helpers/runtime-gateway.ts'
import { captureLogs, waitFor } from '../sessions/capture-logs.ts'

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

test('new request ids are UUIDv7: distinct, and in time order across milliseconds', () => {
  const ids = Array.from({ length: 20_000 }, () => newRequestId())
  assert.equal(new Set(ids).size, ids.length)
  for (const id of ids) assert.match(id, UUID_V7)
  const ms = Date.UTC(2026, 0, 1)
  const earlier = newRequestId(ms)
  const later = newRequestId(ms + 1)
  assert.ok(earlier < later, `${earlier} < ${later}`)
  // Within one millisecond the counter keeps them in the order they were made.
  const [first, second] = [newRequestId(ms), newRequestId(ms)]
  assert.ok(first < second, `${first} < ${second}`)
  assert.equal(earlier.slice(0, 13).replace('-', ''), ms.toString(16).padStart(12, '0'), 'ms first')
})

test('an incoming X-Request-ID is adopted only if short and of safe characters', () => {
  for (const ok of [
    'abc',
    'f'.repeat(128),
    '3f2a8c1e-1b7d-4c2e-9a1b-0c6d5e4f3a2b',
    'Zm9v+YmFy/=',
    'a.b:c_d-e',
  ])
    assert.ok(INCOMING_REQUEST_ID.test(ok), ok)
  for (const bad of ['', 'f'.repeat(129), 'a b', 'a,b', 'a, b', 'a"b', '<script>', 'a\tb', 'ключ', 'a\nb'])
    assert.ok(!INCOMING_REQUEST_ID.test(bad), JSON.stringify(bad))
})

/** A gateway with a real simulated runtime registered as k1, and a bearer for an operator of its team. */
async function start(t: TestContext, env: Record<string, string>) {
  const logs = captureLogs()
  const { gw, runtime } = await gatewayWithRuntime(t, { env, logger: logs.logger })
  const operator = `Bearer ${await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] })}`
  /** POSTs a message to k1 (forwarded to the runtime) with extra headers; returns status, body, id header. */
  let keys = 0
  const post = async (headers: Record<string, string>) => {
    const body = { run: runtime.run, key: `key-${++keys}`, text: 'hi' }
    const res = await fetch(`${gw.url}/desktop/k1/mcp/messages`, {
      method: 'POST',
      headers: { authorization: operator, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      id: res.headers.get('x-request-id') ?? '',
    }
  }
  /** What the runtime received as X-Request-ID on its last POST messages. */
  const atRuntime = () =>
    runtime.received.filter((r) => r.method === 'POST' && r.url.startsWith('/messages')).at(-1)?.headers[
      'x-request-id'
    ]
  const audited = async (requestId: string) =>
    (await gw.app.audit.recent({ limit: 50 })).find((r) => r.requestId === requestId)
  const logged = (requestId: string) => logs.records().filter((r) => r.reqId === requestId)
  return { gw, runtime, post, atRuntime, audited, logged, operator }
}

test('without a trusted proxy the gateway makes every id: in the header, the audit, the logs and upstream', async (t) => {
  const { post, atRuntime, audited, logged } = await start(t, { GATEWAY_TRUST_PROXY: 'false' })
  const sent = await post({ 'x-request-id': 'chosen-by-the-client', 'x-forwarded-for': '203.0.113.7' })
  assert.equal(sent.status, 202, JSON.stringify(sent.body))
  assert.match(sent.id, UUID_V7)
  assert.notEqual(sent.id, 'chosen-by-the-client')
  assert.equal(atRuntime(), sent.id)
  const record = await audited(sent.id)
  assert.ok(record, 'the write is audited under its id')
  // X-Forwarded-For from an untrusted peer is not believed either.
  assert.equal(record.clientIp, '127.0.0.1')
  await waitFor('the request log lines', () => logged(sent.id).some((r) => r.msg === 'request completed'))
  assert.ok(logged(sent.id).some((r) => r.msg === 'audit'))

  const second = await post({})
  assert.notEqual(second.id, sent.id)
})

test('a trusted proxy names the request: its X-Request-ID is kept end to end, a malformed one replaced', async (t) => {
  const { gw, post, atRuntime, audited, logged, operator } = await start(t, {
    GATEWAY_TRUST_PROXY: 'loopback',
  })
  const ingressId = '8f14e45fceea167a5a36dedd4bea2543'
  const sent = await post({ 'x-request-id': ingressId, 'x-forwarded-for': '203.0.113.7' })
  assert.equal(sent.status, 202, JSON.stringify(sent.body))
  assert.equal(sent.id, ingressId)
  assert.equal(atRuntime(), ingressId)
  const record = await audited(ingressId)
  assert.equal(record?.clientIp, '203.0.113.7', 'the client behind the trusted proxy')
  await waitFor('the request log lines', () => logged(ingressId).some((r) => r.msg === 'request completed'))

  // A refusal carries it in the body as well: an unknown session.
  const res = await fetch(`${gw.url}/desktop/k9/mcp/messages`, {
    method: 'POST',
    headers: { authorization: operator, 'content-type': 'application/json', 'x-request-id': 'ingress-2' },
    body: JSON.stringify({ run: 'r', key: 'k', text: 'hi' }),
  })
  assert.equal(res.status, 404)
  assert.equal(res.headers.get('x-request-id'), 'ingress-2')
  assert.deepEqual(await res.json(), {
    error: 'session_not_found',
    message: 'no such session',
    requestId: 'ingress-2',
  })
  assert.equal((await audited('ingress-2'))?.error, 'session_not_found')
  await waitFor('the refusal log line', () => logged('ingress-2').some((r) => r.msg === 'request refused'))

  // Too long, a space, markup, and two headers (node joins them with a comma).
  for (const bad of ['x'.repeat(129), 'two words', '<script>alert(1)</script>', 'a, b']) {
    const res = await post({ 'x-request-id': bad })
    assert.match(res.id, UUID_V7, bad)
    assert.equal(atRuntime(), res.id, bad)
    assert.ok(await audited(res.id), bad)
  }
})

test('a trust list the peer is not on: its X-Request-ID is ignored', async (t) => {
  const { post, atRuntime } = await start(t, { GATEWAY_TRUST_PROXY: '10.0.0.1,192.168.0.0/16' })
  const sent = await post({ 'x-request-id': 'from-an-unlisted-peer' })
  assert.equal(sent.status, 202)
  assert.match(sent.id, UUID_V7)
  assert.equal(atRuntime(), sent.id)
})

test('event and overview streams name their request in X-Request-ID too', async (t) => {
  const { gw, operator } = await start(t, { GATEWAY_TRUST_PROXY: 'loopback' })
  /** The X-Request-ID of a stream's head (fetch resolves on the head); the stream is then left. */
  const head = async (path: string, headers: Record<string, string>) => {
    const abort = new AbortController()
    const res = await fetch(`${gw.url}${path}`, {
      headers: { authorization: operator, ...headers },
      signal: abort.signal,
    })
    assert.equal(res.status, 200, path)
    assert.equal(res.headers.get('content-type'), 'text/event-stream', path)
    abort.abort()
    return res.headers.get('x-request-id')
  }
  assert.equal(await head('/desktop/k1/mcp/events', { 'x-request-id': 'ingress-ev' }), 'ingress-ev')
  assert.equal(await head('/api/overview', { 'x-request-id': 'ingress-ov' }), 'ingress-ov')
  assert.match((await head('/desktop/k1/mcp/events', { 'x-request-id': 'a, b' })) ?? '', UUID_V7)
  assert.match((await head('/api/overview', {})) ?? '', UUID_V7)
})
