import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { SignJWT } from 'jose'
import * as errors from '../../src/errors.ts'
import { clientErrorAnswer, GatewayError, SessionNotFound, toErrorBody } from '../../src/errors.ts'
import { TEST_AUDIENCE, TEST_ISSUER, TEST_JWT_SECRET } from '../helpers/jwt.ts'
import { send, startProxy } from '../upstream/support.ts'

/**
 * Every refusal below must be our shape, a stable snake_case code, and quote nothing that was sent. Answers
 * to what node's parser refused (`raw`) have no request, so no request id.
 */
function assertOurs(text: string, status: number, code: string, sent: string, raw = false): void {
  const body = JSON.parse(text) as Record<string, unknown>
  const keys = raw ? ['error', 'message'] : ['error', 'message', 'requestId']
  if (status === 413) keys.push('limit')
  assert.deepEqual(Object.keys(body).sort(), keys.sort(), text)
  assert.equal(body.error, code, text)
  assert.ok(!text.includes(sent), `the answer quotes what was sent: ${text}`)
  assert.ok(status >= 400)
}

test('a URL that does not decode (%C0%AE) is 400 bad_request, without the URL in the answer', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  for (const path of ['/%C0%AE', '/desktop/k1/mcp/%C0%AE', '/desktop/k1/mcp/messages/%E0%A4%A']) {
    const res = await send(gw.url, { path, headers: { authorization: auth.operator } })
    assert.equal(res.status, 400, path)
    assertOurs(res.text, res.status, 'bad_request', path.slice(path.lastIndexOf('/') + 1))
  }
  assert.equal(echo.received.length, 0)
})

test("the router's 404 and an over-long path parameter answer in our shape", async (t) => {
  const { gw, auth } = await startProxy(t)
  const missing = await send(gw.url, {
    path: '/no/such/place-xyz',
    headers: { authorization: auth.operator },
  })
  assert.equal(missing.status, 404)
  assertOurs(missing.text, 404, 'route_not_found', 'place-xyz')
  const long = `/desktop/k1/mcp/messages/${'a'.repeat(5000)}`
  const res = await send(gw.url, { path: long, headers: { authorization: auth.operator } })
  assert.equal(res.status, 414)
  assertOurs(res.text, 414, 'url_too_long', 'a'.repeat(100))
})

test('bad JSON and an over-limit JSON body on the gateway own routes quote nothing of the body', async (t) => {
  const { gw, auth } = await startProxy(t, { GATEWAY_MAX_JSON_BYTES: '2048' })
  const admin = `Bearer ${await adminBearer()}`
  const put = (body: string) =>
    send(gw.url, {
      method: 'PUT',
      path: '/admin/sessions/k9',
      headers: { authorization: admin, 'content-type': 'application/json' },
      body,
    })
  // Fastify's default JSON parser (admin routes) fails with a SyntaxError that quotes the bytes.
  const refusals: Array<[string, number, string, string]> = [
    ['{"team": secret-looking-bytes', 400, 'bad_request', 'secret-looking-bytes'],
    ['', 400, 'bad_request', 'k9'],
    [JSON.stringify({ team: 'x'.repeat(4096) }), 413, 'payload_too_large', 'xxxx'],
  ]
  for (const [body, status, code, sent] of refusals) {
    const res = await put(body)
    assert.equal(res.status, status, code)
    assertOurs(res.text, status, code, sent)
    // The over-limit answer names the limit, as the proxied routes' 413 does.
    if (status === 413) assert.equal(JSON.parse(res.text).limit, 2048)
  }
  const media = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/messages',
    headers: { authorization: auth.operator, 'content-type': 'text/html; x=<script>' },
    body: 'x',
  })
  assert.equal(media.status, 415)
  assertOurs(media.text, 415, 'unsupported_media_type', '<script>')
})

test('a signed bearer with exp 1e300 is refused 401 invalid_credential, not a 500', async (t) => {
  const { gw } = await startProxy(t)
  const token = await new SignJWT({ roles: ['operator'], teams: ['*'], exp: 1e300 })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('forever')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .sign(new TextEncoder().encode(TEST_JWT_SECRET))
  for (const path of ['/auth/me', '/desktop/k1/mcp/inbox']) {
    const res = await send(gw.url, { path, headers: { authorization: `Bearer ${token}` } })
    assert.equal(res.status, 401, path)
    assertOurs(res.text, 401, 'invalid_credential', token)
    assert.match(JSON.parse(res.text).message, /"exp"/)
  }
})

test('a request node cannot parse gets our 400 body, headers too large our 431', async (t) => {
  const { gw } = await startProxy(t)
  const port = Number(new URL(gw.url).port)
  const raw = (request: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end(request))
      let text = ''
      socket.on('data', (d: Buffer) => {
        text += d.toString('utf8')
      })
      socket.on('close', () => resolve(text))
      socket.on('error', reject)
    })
  const garbage = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header Line <evil>\r\n\r\n')
  assert.match(garbage, /^HTTP\/1\.1 400 /)
  assertOurs(garbage.slice(garbage.indexOf('\r\n\r\n') + 4), 400, 'bad_request', '<evil>', true)
  const huge = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`)
  assert.match(huge, /^HTTP\/1\.1 431 /)
  assertOurs(huge.slice(huge.indexOf('\r\n\r\n') + 4), 431, 'headers_too_large', 'bbbb', true)
})

async function adminBearer(): Promise<string> {
  return new SignJWT({ roles: ['admin'], teams: ['*'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('adam')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(TEST_JWT_SECRET))
}

test('the raw answers to what node refuses: timeouts 408, everything else 400, a reset nothing', () => {
  const timeout = clientErrorAnswer(Object.assign(new Error('x'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }))
  assert.match(String(timeout), /^HTTP\/1\.1 408 Request Timeout\r\n/)
  assertOurs(String(timeout).split('\r\n\r\n')[1] ?? '', 408, 'request_timeout', 'x', true)
  assert.match(
    String(clientErrorAnswer(Object.assign(new Error('x'), { code: 'HPE_INVALID_METHOD' }))),
    /^HTTP\/1\.1 400 /,
  )
  assert.equal(clientErrorAnswer(Object.assign(new Error('x'), { code: 'ECONNRESET' })), null)
})

test('every error errors.ts makes is a GatewayError, answered as it is; a lookalike of another origin is a 500', () => {
  const made = Object.entries(errors).filter(
    ([name, value]) => typeof value === 'function' && /^[A-Z]/.test(name) && value !== GatewayError,
  )
  assert.ok(made.length > 40, `${made.length} error constructors`)
  for (const [name, Make] of made) {
    const err = new (Make as new (...args: unknown[]) => Error)('x', 'y')
    assert.ok(err instanceof GatewayError, name)
    const { status, body } = toErrorBody(err)
    assert.ok(status >= 400 && status < 600, name)
    assert.match(body.error, /^[a-z_]+$/, name)
  }
  assert.deepEqual(toErrorBody(new SessionNotFound()), {
    status: 404,
    body: { error: 'session_not_found', message: 'no such session' },
  })
  // An error of other origin shaped like ours is not answered with its code or message (they could say anything).
  const lookalike = Object.assign(new Error('a detail of the internals'), {
    code: 'UPSTREAM_UNREACHABLE',
    statusCode: 502,
  })
  assert.deepEqual(toErrorBody(lookalike), {
    status: 500,
    body: { error: 'internal', message: 'internal error' },
  })
})
