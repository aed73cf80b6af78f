import assert from 'node:assert/strict'
import { test } from 'node:test'
import { TOKEN_HEADER } from '../../src/upstream/agent.ts'
import { connectionListed, upstreamRequestHeaders } from '../../src/upstream/headers.ts'

const ctx = {
  token: 'the-token',
  hasBody: false,
  clientIp: '10.0.0.9',
  protocol: 'https',
  host: 'gw.test',
  requestId: 'rid-1',
  trace: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
}

test('upstream headers: only the allowlist passes, credentials and browser context never do', () => {
  const out = upstreamRequestHeaders(
    {
      accept: 'application/json',
      'accept-encoding': 'gzip',
      'accept-language': 'en',
      'if-none-match': '"abc"',
      'if-modified-since': 'Tue, 01 Jan 2030 00:00:00 GMT',
      range: 'bytes=0-9',
      'user-agent': 'sidebar/1',
      'last-event-id': 'r1:4',
      authorization: 'Bearer operator-jwt',
      cookie: 'krg_session=abc',
      [TOKEN_HEADER]: 'client-supplied-token',
      origin: 'https://evil.test',
      referer: 'https://evil.test/page',
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'cors',
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-host': 'evil.test',
      'x-forwarded-proto': 'http',
      'x-real-ip': '6.6.6.6',
      forwarded: 'for=6.6.6.6',
      'proxy-authorization': 'Basic eA==',
      te: 'trailers',
      trailer: 'x-foo',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      'keep-alive': 'timeout=5',
      expect: '100-continue',
      host: 'gw.test',
      'x-custom': 'nope',
      // The gateway's id for the request replaces whatever the client sent (a trusted one became request.id).
      'x-request-id': 'client-chosen',
      traceparent: '00-11111111111111111111111111111111-2222222222222222-01',
      tracestate: 'evil=1',
      'content-type': 'application/json',
      'content-length': '12',
    },
    ctx,
  )
  assert.deepEqual(out, {
    accept: 'application/json',
    // Never the client's: an answer must come uncompressed to be checked for an echoed token.
    'accept-encoding': 'identity',
    'accept-language': 'en',
    'if-none-match': '"abc"',
    'if-modified-since': 'Tue, 01 Jan 2030 00:00:00 GMT',
    range: 'bytes=0-9',
    'user-agent': 'sidebar/1',
    'last-event-id': 'r1:4',
    'x-forwarded-for': '10.0.0.9',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'gw.test',
    'x-request-id': 'rid-1',
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    [TOKEN_HEADER]: 'the-token',
  })
})

test('upstream headers: content headers travel only with a body', () => {
  const client = { 'content-type': 'multipart/form-data; boundary=x', 'content-length': '99' }
  const without = upstreamRequestHeaders(client, ctx)
  assert.equal(without['content-type'], undefined)
  assert.equal(without['content-length'], undefined)
  const withBody = upstreamRequestHeaders(client, { ...ctx, hasBody: true })
  assert.equal(withBody['content-type'], 'multipart/form-data; boundary=x')
  assert.equal(withBody['content-length'], '99')
})

test('upstream headers: naming the token or forwarding headers in Connection cannot drop them', () => {
  const out = upstreamRequestHeaders(
    {
      connection: `keep-alive, ${TOKEN_HEADER}, X-Forwarded-For, x-forwarded-proto,x-forwarded-host, X-Request-ID, Accept`,
      accept: 'text/plain',
      'user-agent': 'ua',
    },
    ctx,
  )
  assert.equal(out[TOKEN_HEADER], 'the-token')
  assert.equal(out['x-forwarded-for'], '10.0.0.9')
  assert.equal(out['x-forwarded-proto'], 'https')
  assert.equal(out['x-forwarded-host'], 'gw.test')
  assert.equal(out['x-request-id'], 'rid-1')
  // A header the client itself marked hop-by-hop is dropped, even when allowlisted.
  assert.equal(out.accept, undefined)
  assert.equal(out['user-agent'], 'ua')
})

test('upstream headers: a Connection-listed content header is dropped too', () => {
  const out = upstreamRequestHeaders(
    { connection: 'content-length', 'content-length': '5', 'content-type': 'application/json' },
    { ...ctx, hasBody: true },
  )
  assert.equal(out['content-length'], undefined)
  assert.equal(out['content-type'], 'application/json')
})

test('connectionListed parses comma lists, arrays and case', () => {
  assert.deepEqual([...connectionListed(' Keep-Alive , X-A,,x-b ')], ['keep-alive', 'x-a', 'x-b'])
  assert.deepEqual([...connectionListed(['a', 'B'])], ['a', 'b'])
  assert.deepEqual([...connectionListed(undefined)], [])
})
