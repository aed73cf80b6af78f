import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withoutRequestId } from '../helpers/error-body.ts'
import { MESSAGING_TOKEN, send, startProxy, waitFor } from './support.ts'

const JSON_CT = 'application/json; charset=utf-8'

test('reads: token injected, client credentials and forwarding claims stripped, query filtered', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const res = await send(gw.url, {
    path: '/desktop/k1/mcp/messages?since=3&state=pending,queued&token=leak1&kasm_runtime_token=leak2&x=1',
    headers: {
      authorization: auth.viewer,
      cookie: 'krg_session=abc; kasm=def',
      'x-kasm-runtime-session-token': 'client-token',
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-host': 'evil.test',
      'x-forwarded-proto': 'gopher',
      forwarded: 'for=6.6.6.6;host=evil.test',
      origin: 'https://evil.test',
      referer: 'https://evil.test/x',
      'sec-fetch-site': 'cross-site',
      'proxy-authorization': 'Basic eDp5',
      te: 'trailers',
      connection: 'keep-alive, x-kasm-runtime-session-token, x-forwarded-for, X-Custom',
      'keep-alive': 'timeout=5',
      'x-custom': 'nope',
      accept: 'application/json',
      'if-none-match': '"v1"',
      range: 'bytes=0-10',
      'user-agent': 'sidebar-test/1',
    },
  })
  assert.equal(res.status, 200)
  assert.equal(res.text, '{"ok":true}')
  assert.equal(echo.received.length, 1)
  const got = echo.received[0]!
  assert.equal(got.method, 'GET')
  assert.equal(got.url, '/base/k1/messages?since=3&state=pending%2Cqueued')
  assert.equal(got.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN)
  // Exactly one token header, ours.
  const tokenHeaders = got.rawHeaders.filter((_, i) => i % 2 === 0 && /x-kasm-runtime-session-token/i.test(_))
  assert.equal(tokenHeaders.length, 1)
  for (const name of [
    'authorization',
    'cookie',
    'forwarded',
    'origin',
    'referer',
    'sec-fetch-site',
    'proxy-authorization',
    'te',
    'keep-alive',
    'x-custom',
    'content-type',
    'content-length',
    'transfer-encoding',
  ]) {
    assert.equal(got.headers[name], undefined, name)
  }
  assert.equal(got.headers['x-forwarded-for'], '127.0.0.1')
  assert.equal(got.headers['x-forwarded-proto'], 'http')
  assert.equal(got.headers['x-forwarded-host'], new URL(gw.url).host)
  assert.equal(got.headers.accept, 'application/json')
  assert.equal(got.headers['if-none-match'], '"v1"')
  assert.equal(got.headers.range, 'bytes=0-10')
  assert.equal(got.headers['user-agent'], 'sidebar-test/1')
  assert.equal(got.headers.host, new URL(echo.origin).host)
})

test('every read route is forwarded to its rebuilt path with only its own query parameters', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const cases: Array<[string, string]> = [
    ['/desktop/k1/mcp/messages/m%3A1?since=2', '/base/k1/messages/m%3A1'],
    ['/desktop/k1/mcp/runs/run-1/messages/key_1.a?x=1', '/base/k1/runs/run-1/messages/key_1.a'],
    ['/desktop/k1/mcp/attachments/att-1?inline=1&token=x', '/base/k1/attachments/att-1?inline=1'],
    ['/desktop/k1/mcp/requests?state=open&since=4', '/base/k1/requests?state=open'],
    ['/desktop/k1/mcp/requests/q1', '/base/k1/requests/q1'],
    ['/desktop/k1/mcp/inbox?kasm_runtime_token=x', '/base/k1/inbox'],
    ['/desktop/k1/mcp/artifacts/report.json?inline=1', '/base/k1/artifacts/report.json'],
    ['/desktop/k1/mcp/artifacts/screenshots/step-1.png', '/base/k1/artifacts/screenshots/step-1.png'],
    ['/desktop/k1/mcp/artifacts/logs/run%20one.log', '/base/k1/artifacts/logs/run%20one.log'],
  ]
  for (const [path, upstream] of cases) {
    const before = echo.received.length
    const res = await send(gw.url, { path, headers: { authorization: auth.viewer } })
    assert.equal(res.status, 200, path)
    assert.equal(echo.received.length, before + 1, path)
    assert.equal(echo.received.at(-1)!.url, upstream, path)
    assert.equal(echo.received.at(-1)!.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN)
  }
})

test('a repeated query parameter is refused, not guessed', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const res = await send(gw.url, {
    path: '/desktop/k1/mcp/messages?since=1&since=2',
    headers: { authorization: auth.viewer },
  })
  assert.equal(res.status, 400)
  assert.equal(echo.received.length, 0)
})

test('answers pass through: status and exact body bytes; headers only as the answer policy allows', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const body = Buffer.from('{"b" : 2,   "a":[ 1,2 ],"unknown_v2":{"x":null}}\n')
  echo.handler = (_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(body.length),
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      'content-disposition': 'attachment; filename="x.json"',
      'cache-control': 'no-store',
      etag: '"abc"',
      'x-runtime-new': 'v1-additive',
      'set-cookie': ['kasm_session=1; Path=/', 'x=2'],
      connection: 'x-hop',
      'x-hop': 'secret-hop',
      'access-control-allow-origin': '*',
      'x-kasm-runtime-session-token': MESSAGING_TOKEN,
      'x-echo': `token ${MESSAGING_TOKEN}`,
    })
    res.end(body)
  }
  const res = await send(gw.url, { path: '/desktop/k1/mcp/inbox', headers: { authorization: auth.viewer } })
  assert.equal(res.status, 200)
  assert.deepEqual(res.body, body)
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8')
  assert.equal(res.headers['content-length'], String(body.length))
  assert.equal(res.headers['x-content-type-options'], 'nosniff')
  assert.equal(res.headers['content-security-policy'], "sandbox; default-src 'none'")
  assert.equal(res.headers['cache-control'], 'no-store')
  assert.equal(res.headers.etag, '"abc"')
  // An allowlist: a header v1 does not name (even a harmless newer one) is the gateway's to add, not the runtime's.
  for (const name of [
    'content-disposition',
    'x-runtime-new',
    'set-cookie',
    'x-hop',
    'access-control-allow-origin',
    'x-kasm-runtime-session-token',
    'x-echo',
  ]) {
    assert.equal(res.headers[name], undefined, name)
  }
  assert.ok(!JSON.stringify(res.headers).includes(MESSAGING_TOKEN))
})

test('runtime statuses pass through with their bodies: 202, 200, 409, 413, 400, 422, 404, 503 JSON, 304', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const answers: Array<[number, string]> = [
    [202, '{"id":"m1","state":"pending"}'],
    [200, '{"id":"m1","state":"queued"}'],
    [409, '{"error":"wrong_run","run":"r2","epoch":"e7"}'],
    [413, '{"error":"too_long"}'],
    [400, '{"error":"unknown_field","field":"colour"}'],
    [422, '{"fields":[{"field":"browser","error":"not in enum"}]}'],
    [404, '{"error":"no_such_run"}'],
    [503, '{"error":"history_unreadable"}'],
  ]
  for (const [status, text] of answers) {
    echo.handler = (_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(text)
    }
    const res = await send(gw.url, {
      method: 'POST',
      path: '/desktop/k1/mcp/messages',
      headers: { authorization: auth.operator, 'content-type': 'application/json' },
      body: '{"run":"r1","key":"k1","text":"hi"}',
    })
    assert.equal(res.status, status)
    assert.equal(res.text, text)
  }
  echo.handler = (_req, res) => {
    res.writeHead(304, { etag: '"v1"' })
    res.end()
  }
  const notModified = await send(gw.url, {
    path: '/desktop/k1/mcp/artifacts/report.json',
    headers: { authorization: auth.viewer, 'if-none-match': '"v1"' },
  })
  assert.equal(notModified.status, 304)
  assert.equal(notModified.headers.etag, '"v1"')
})

test('JSON writes are forwarded as the exact bytes received, unknown fields included', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  echo.handler = (_req, res) => {
    res.writeHead(202, { 'content-type': 'application/json' })
    res.end('{"id":"m1"}')
  }
  const body = Buffer.from(
    '{ "run" : "r1",\n  "key":"k-é",  "text":"h\\u00e9llo", "future_field": {"nested": [1, 2.50]} , "n": 1e400 }',
  )
  const res = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/messages?token=x&since=1',
    headers: {
      authorization: auth.operator,
      'content-type': JSON_CT,
      'content-length': String(body.length),
    },
    body,
  })
  assert.equal(res.status, 202)
  const got = echo.received[0]!
  assert.equal(got.method, 'POST')
  assert.equal(got.url, '/base/k1/messages')
  assert.deepEqual(got.body, body)
  assert.equal(got.headers['content-type'], JSON_CT)
  assert.equal(got.headers['content-length'], String(body.length))
  assert.equal(got.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN)

  // A chunked JSON body arrives upstream with a computed Content-Length and the same bytes.
  const chunked = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/actions',
    headers: { authorization: auth.operator, 'content-type': 'application/json' },
    body: async (req) => {
      req.write('{"run":"r1","key":"a1",')
      req.write('"action":"stop"}')
    },
  })
  assert.equal(chunked.status, 202)
  const action = echo.received[1]!
  assert.equal(action.url, '/base/k1/actions')
  assert.equal(action.body.toString(), '{"run":"r1","key":"a1","action":"stop"}')
  assert.equal(action.headers['content-length'], String(action.body.length))
  assert.equal(action.headers['transfer-encoding'], undefined)
})

test('write bodies: 413 over the JSON limit, 400 for non-objects, 415 for other types, none forwarded', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const post = (path: string, contentType: string | undefined, body: string | Buffer) =>
    send(gw.url, {
      method: 'POST',
      path,
      headers: { authorization: auth.operator, ...(contentType ? { 'content-type': contentType } : {}) },
      body,
    })
  const big = JSON.stringify({ run: 'r1', key: 'k', text: 'x'.repeat(64 * 1024) })
  const cases: Array<[string, string | undefined, string | Buffer, number, string]> = [
    ['/desktop/k1/mcp/messages', 'application/json', big, 413, 'payload_too_large'],
    ['/desktop/k1/mcp/messages', 'application/json', '{"run":', 400, 'bad_request'],
    ['/desktop/k1/mcp/messages', 'application/json', '[1,2]', 400, 'bad_request'],
    ['/desktop/k1/mcp/messages', 'application/json', '"text"', 400, 'bad_request'],
    ['/desktop/k1/mcp/messages', 'text/plain', 'hello', 415, 'unsupported_media_type'],
    ['/desktop/k1/mcp/messages', 'application/x-www-form-urlencoded', 'a=1', 415, 'unsupported_media_type'],
    [
      '/desktop/k1/mcp/messages',
      'multipart/form-data; boundary=x',
      '--x--\r\n',
      415,
      'unsupported_media_type',
    ],
    ['/desktop/k1/mcp/messages', undefined, '', 415, 'unsupported_media_type'],
    ['/desktop/k1/mcp/actions', 'application/xml', '<a/>', 415, 'unsupported_media_type'],
    ['/desktop/k1/mcp/attachments', 'application/json', '{"file":"x"}', 415, 'unsupported_media_type'],
  ]
  for (const [path, type, body, status, code] of cases) {
    const res = await post(path, type, body)
    assert.equal(res.status, status, `${path} ${type}`)
    assert.equal(JSON.parse(res.text).error, code, `${path} ${type}`)
    // Over the limit, the answer says the limit (GATEWAY_MAX_JSON_BYTES), so a client can say by how much.
    if (status === 413) assert.equal(JSON.parse(res.text).limit, 64 * 1024)
  }
  assert.equal(echo.received.length, 0)
})

test('session-token-only writes answer 403 session_token_only and are never forwarded', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const post = (path: string, body?: string) =>
    send(gw.url, {
      method: 'POST',
      path,
      headers: {
        authorization: auth.operator,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
    })
  const refusals = [
    await post('/desktop/k1/mcp/requests', '{"title":"Which?","fields":[]}'),
    await post('/desktop/k1/mcp/requests/q1/cancel'),
    await post('/desktop/k1/mcp/requests/q1/cancel', '{}'),
    await post('/desktop/k1/mcp/requests/q1/cancel', ''),
    await post('/desktop/k1/mcp/requests', 'not json'),
    await post('/desktop/k1/mcp/actions', '{"run":"r1","key":"a1","action":"ack","args":{"ids":["m1"]}}'),
    await post('/desktop/k1/mcp/actions', '{"run":"r1","key":"a2","action":" ACK "}'),
  ]
  for (const res of refusals) {
    assert.equal(res.status, 403)
    assert.equal(JSON.parse(res.text).error, 'session_token_only')
  }
  assert.equal(echo.received.length, 0)
  const stop = await post('/desktop/k1/mcp/actions', '{"run":"r1","key":"a3","action":"stop"}')
  assert.equal(stop.status, 200)
  assert.equal(echo.received.length, 1)
})

test('access: anonymous 401, viewer cannot write, foreign and unknown sessions look the same (404)', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const anon = await send(gw.url, { path: '/desktop/k1/mcp/inbox' })
  assert.equal(anon.status, 401)
  const viewerWrite = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/messages',
    headers: { authorization: auth.viewer, 'content-type': 'application/json' },
    body: '{"run":"r1","key":"k"}',
  })
  assert.equal(viewerWrite.status, 403)
  assert.equal(JSON.parse(viewerWrite.text).error, 'forbidden')
  const foreign = await send(gw.url, {
    path: '/desktop/k1/mcp/inbox',
    headers: { authorization: auth.foreign },
  })
  const unknown = await send(gw.url, {
    path: '/desktop/k9/mcp/inbox',
    headers: { authorization: auth.foreign },
  })
  assert.equal(foreign.status, 404)
  assert.equal(unknown.status, 404)
  assert.equal(withoutRequestId(foreign.text), withoutRequestId(unknown.text))
  assert.equal(JSON.parse(foreign.text).error, 'session_not_found')
  // An anonymous upload is refused before its body is read or anything is sent upstream.
  const anonUpload = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(10 ** 9) },
    body: async () => {},
  })
  assert.equal(anonUpload.status, 401)
  assert.equal(echo.received.length, 0)
})

test('routes outside v1 answer 404; extra read routes are GET-only passthroughs', async (t) => {
  const { gw, echo, auth } = await startProxy(t, { GATEWAY_EXTRA_READ_ROUTES: 'report,v1/status' })
  const get = (path: string, method = 'GET') =>
    send(gw.url, { method, path, headers: { authorization: auth.operator } })
  for (const path of ['/desktop/k1/mcp/v1/files/x', '/desktop/k1/mcp/debug', '/desktop/k1/mcp/']) {
    assert.equal((await get(path)).status, 404, path)
  }
  assert.equal((await get('/desktop/k1/mcp/messages', 'DELETE')).status, 404)
  assert.equal((await get('/desktop/k1/mcp/inbox', 'HEAD')).status, 404)
  assert.equal((await get('/desktop/k1/mcp/report', 'POST')).status, 404)
  assert.equal(echo.received.length, 0)

  assert.equal((await get('/desktop/k1/mcp/report')).status, 200)
  assert.equal(echo.received.at(-1)!.url, '/base/k1/report')
  assert.equal((await get('/desktop/k1/mcp/v1/status?verbose=1&token=x&access_token=y')).status, 200)
  assert.equal(echo.received.at(-1)!.url, '/base/k1/v1/status?verbose=1')
  assert.equal(echo.received.at(-1)!.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN)
  const anon = await send(gw.url, { path: '/desktop/k1/mcp/report' })
  assert.equal(anon.status, 401)
})

test('writes are audited with session, route, key, action and upstream status', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  echo.handler = (_req, res) => {
    res.writeHead(202, { 'content-type': 'application/json' })
    res.end('{}')
  }
  await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/actions',
    headers: { authorization: auth.operator, 'content-type': 'application/json' },
    body: '{"run":"r1","key":"key-7","action":"stop"}',
  })
  await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/actions',
    headers: { authorization: auth.operator, 'content-type': 'application/json' },
    body: '{"run":"r1","key":"key-8","action":"ack"}',
  })
  const all = await waitFor('audit records', async () => {
    const r = await gw.app.audit.recent({ limit: 10 })
    return r.length >= 2 ? r : undefined
  })
  const stop = all.find((r) => r.key === 'key-7')
  assert.ok(stop)
  assert.equal(stop.kasmId, 'k1')
  assert.equal(stop.route, 'actions')
  assert.equal(stop.action, 'stop')
  assert.equal(stop.upstreamStatus, 202)
  assert.equal(stop.outcome, 'forwarded')
  assert.equal(stop.sub, 'olga')
  const ack = all.find((r) => r.key === 'key-8')
  assert.ok(ack)
  assert.equal(ack.outcome, 'refused')
  assert.equal(ack.action, 'ack')
  assert.equal(ack.status, 403)
  assert.equal(ack.upstreamStatus, undefined)
  assert.equal(echo.received.length, 1)
})

test('upstream latency is recorded per v1 route and status', async (t) => {
  const { gw, auth } = await startProxy(t)
  await send(gw.url, { path: '/desktop/k1/mcp/inbox', headers: { authorization: auth.viewer } })
  const text = await gw.app.metrics.registry.metrics()
  assert.match(text, /krg_upstream_request_duration_seconds_count\{route="inbox",status="200"\} 1/)
})
