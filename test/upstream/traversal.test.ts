import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { send, startProxy } from './support.ts'

/**
 * Every path trick, sent raw (node:http does not normalise paths), must answer 404 (400 for a malformed
 * percent-encoding and 414 for a parameter over the router's length limit, which the router refuses first)
 * and reach nothing upstream.
 */
const TRICKS: readonly string[] = [
  '/desktop/k1/mcp/artifacts/../../etc/passwd',
  '/desktop/k1/mcp/artifacts/screenshots/../../../etc/passwd',
  '/desktop/k1/mcp/artifacts/..',
  '/desktop/k1/mcp/artifacts/.',
  '/desktop/k1/mcp/artifacts/./report.json',
  '/desktop/k1/mcp/artifacts/%2e%2e/secret',
  '/desktop/k1/mcp/artifacts/%2E%2e%2fsecret',
  '/desktop/k1/mcp/artifacts/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  '/desktop/k1/mcp/artifacts/%252e%252e/secret',
  '/desktop/k1/mcp/artifacts/%252e%252e%252fsecret',
  '/desktop/k1/mcp/artifacts/report%2ejson',
  '/desktop/k1/mcp/artifacts/a%2fb',
  '/desktop/k1/mcp/artifacts/a%2Fb',
  '/desktop/k1/mcp/artifacts/a%5cb',
  '/desktop/k1/mcp/artifacts/..%5c..%5csecret',
  '/desktop/k1/mcp/artifacts/a\\b',
  '/desktop/k1/mcp/artifacts/..\\..\\secret',
  '/desktop/k1/mcp/artifacts//etc/passwd',
  '/desktop/k1/mcp/artifacts/a//b',
  '/desktop/k1/mcp/artifacts/report.json;x=1',
  '/desktop/k1/mcp/artifacts/a%3bb',
  '/desktop/k1/mcp/artifacts/.env',
  '/desktop/k1/mcp/artifacts/screenshots/.hidden.png',
  '/desktop/k1/mcp/artifacts/.git/config',
  '/desktop/k1/mcp/artifacts/',
  '/desktop/k1/mcp/artifacts/screenshots/',
  '/desktop/k1/mcp/artifacts/http://evil.test/x',
  '/desktop/k1/mcp/artifacts/%2f%2fevil.test/x',
  '/desktop/k1/mcp/artifacts/a%00b',
  '/desktop/k1/mcp/artifacts/caf%C3%A9.png',
  '/desktop/k1/m%63p/artifacts/report.json',
  '/desktop/k1/mcp/messages/..',
  '/desktop/k1/mcp/messages/.',
  '/desktop/k1/mcp/messages/%2e%2e',
  '/desktop/k1/mcp/messages/a%2fb',
  '/desktop/k1/mcp/messages/%252e%252e',
  '/desktop/k1/mcp/messages/a;b',
  '/desktop/k1/mcp/messages/a%3bb',
  '/desktop/k1/mcp/messages/a\\b',
  `/desktop/k1/mcp/messages/${'x'.repeat(129)}`,
  '/desktop/k1/mcp/runs/..%2f../messages/k',
  '/desktop/k1/mcp/runs/r1/messages/%2e%2e%2finbox',
  '/desktop/k1/mcp/attachments/..%2f..%2fetc',
  '/desktop/k1/mcp/requests/%2e%2e',
  '/desktop/k1/mcp//messages',
  '/desktop/k1/mcp/./inbox',
  '/desktop/k1/mcp/inbox/',
  '/desktop/k1/mcp/inbox;x',
  '/desktop/k1/mcp/messages;jsessionid=1',
  '/desktop/k1/mcp/inbox/..',
  '/desktop/k1/mcp/%2e%2e/inbox',
  '/desktop/..%2fk1/mcp/inbox',
  '/desktop/k1%2f..%2fk2/mcp/inbox',
  '/desktop/k1.x/mcp/inbox',
  '//desktop/k1/mcp/inbox',
  '/desktop/k1/mcp/artifacts/%ZZ',
  '/desktop/k1/mcp/messages/%ZZ',
]

test('traversal variants answer 404 and never reach the runtime', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  for (const path of TRICKS) {
    const res = await send(gw.url, { path, headers: { authorization: auth.operator } })
    const expected = path.includes('%ZZ') ? 400 : /x{129}/.test(path) ? [404, 414] : 404
    assert.ok(
      Array.isArray(expected) ? expected.includes(res.status) : res.status === expected,
      `${path} -> ${res.status}`,
    )
    if (res.status === 404) {
      assert.match(JSON.parse(res.text).error, /^(route_not_found|session_not_found)$/, path)
    }
  }
  assert.deepEqual(
    echo.received.map((r) => r.url),
    [],
  )
  // The plain file is served: the refusals above are about the tricks, not the route.
  const ok = await send(gw.url, {
    path: '/desktop/k1/mcp/artifacts/screenshots/step-1.png',
    headers: { authorization: auth.operator },
  })
  assert.equal(ok.status, 200)
  assert.equal(echo.received.at(-1)!.url, '/base/k1/artifacts/screenshots/step-1.png')
})

test('an absolute-form request target never selects another upstream', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const { port } = new URL(gw.url)
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1')
    let text = ''
    socket.on('data', (d) => {
      text += d.toString()
    })
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    socket.write(
      `GET http://evil.test/desktop/k1/mcp/../../inbox HTTP/1.1\r\nHost: evil.test\r\nAuthorization: ${auth.operator}\r\nConnection: close\r\n\r\n`,
    )
  })
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1])
  assert.ok(status === 404 || status === 400, answer.slice(0, 200))
  assert.equal(echo.received.length, 0)
})
