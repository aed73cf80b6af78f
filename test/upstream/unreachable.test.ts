import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { type TestContext, test } from 'node:test'
import { MESSAGING_TOKEN, type ProxySetup, send, startProxy } from './support.ts'

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** A server that takes the request and never answers it. */
async function hangingServer(t: TestContext): Promise<string> {
  const server = http.createServer(() => {})
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
}

async function register(setup: ProxySetup, kasmId: string, upstream: string): Promise<void> {
  await setup.gw.app.sessions.put({
    kasmId,
    upstream,
    team: 'blue',
    messagingToken: MESSAGING_TOKEN,
    source: 'admin',
  })
}

async function counter(setup: ProxySetup, reason: string): Promise<number> {
  const metric = await setup.gw.app.metrics.upstreamErrors.get()
  return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0
}

test('a closed port is 502 upstream_unreachable, counted', async (t) => {
  const setup = await startProxy(t)
  await register(setup, 'k2', `http://127.0.0.1:${await closedPort()}/`)
  const res = await send(setup.gw.url, {
    path: '/desktop/k2/mcp/inbox',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(res.status, 502)
  assert.equal(JSON.parse(res.text).error, 'upstream_unreachable')
  assert.equal(await counter(setup, 'unreachable'), 1)
  const write = await send(setup.gw.url, {
    method: 'POST',
    path: '/desktop/k2/mcp/messages',
    headers: { authorization: setup.auth.operator, 'content-type': 'application/json' },
    body: '{"run":"r1","key":"k"}',
  })
  assert.equal(write.status, 502)
  const metrics = await setup.gw.app.metrics.registry.metrics()
  assert.match(metrics, /krg_upstream_request_duration_seconds_count\{route="inbox",status="unreachable"\} 1/)
})

test('a runtime that drops the connection is 502 upstream_unreachable', async (t) => {
  const setup = await startProxy(t)
  setup.echo.handler = (req) => req.socket.destroy()
  const res = await send(setup.gw.url, {
    path: '/desktop/k1/mcp/inbox',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(res.status, 502)
  assert.equal(JSON.parse(res.text).error, 'upstream_unreachable')
})

test('a runtime that never answers is 504 upstream_timeout after the header timeout', async (t) => {
  const setup = await startProxy(t, { GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: '300' })
  await register(setup, 'k3', await hangingServer(t))
  const res = await send(setup.gw.url, {
    path: '/desktop/k3/mcp/messages?since=0',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(res.status, 504)
  assert.equal(JSON.parse(res.text).error, 'upstream_timeout')
  assert.equal(await counter(setup, 'timeout'), 1)
})

test('the runtime refusing the messaging token is 502 upstream_token_refused, counted and logged', async (t) => {
  const setup = await startProxy(t)
  for (const status of [401, 403]) {
    setup.echo.handler = (_req, res) => {
      res.writeHead(status, {
        'content-type': 'application/json',
        'www-authenticate': 'Token',
        'x-runtime-detail': 'kept out',
      })
      res.end('{"error":"bad_token"}')
    }
    const res = await send(setup.gw.url, {
      method: 'POST',
      path: '/desktop/k1/mcp/messages',
      headers: { authorization: setup.auth.operator, 'content-type': 'application/json' },
      body: '{"run":"r1","key":"k"}',
    })
    assert.equal(res.status, 502)
    assert.equal(JSON.parse(res.text).error, 'upstream_token_refused')
    assert.equal(res.headers['www-authenticate'], undefined)
    assert.equal(res.headers['x-runtime-detail'], undefined)
  }
  assert.equal(await counter(setup, 'token_refused'), 2)
  const warn = setup.logs
    .map((l) => JSON.parse(l))
    .find((l) => l.msg?.includes('refused the messaging token'))
  assert.ok(warn, 'a warn line')
  assert.equal(warn.level, 40)
  assert.equal(warn.kasmId, 'k1')
  assert.equal(warn.route, 'messages')
})

test("Kasm's proxy answering for a runtime that is not up becomes a gateway error, not its page", async (t) => {
  const setup = await startProxy(t)
  const cases: Array<[number, string, number, string]> = [
    [502, 'text/html', 502, 'upstream_unreachable'],
    [502, 'application/json', 502, 'upstream_unreachable'],
    [503, 'text/html; charset=utf-8', 502, 'upstream_unreachable'],
    [504, 'text/plain', 504, 'upstream_timeout'],
    [504, 'application/json', 504, 'upstream_timeout'],
  ]
  for (const [status, type, expected, code] of cases) {
    setup.echo.handler = (_req, res) => {
      res.writeHead(status, { 'content-type': type })
      res.end('<html><body>Bad Gateway <script>alert(1)</script></body></html>')
    }
    const res = await send(setup.gw.url, {
      path: '/desktop/k1/mcp/inbox',
      headers: { authorization: setup.auth.viewer },
    })
    assert.equal(res.status, expected)
    assert.equal(JSON.parse(res.text).error, code)
    assert.match(String(res.headers['content-type']), /^application\/json/)
  }
})
