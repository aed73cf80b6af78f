import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { connect } from 'node:net'
import { test } from 'node:test'
import { uploadLimit } from '../../src/upstream/body.ts'
import { type Echo, MESSAGING_TOKEN, send, startProxy, waitFor, write } from './support.ts'

const MAX = 64 * 1024
const ENV = { GATEWAY_MAX_ATTACHMENT_BYTES: String(MAX) }
const BOUNDARY = '----gatewaytest7d1'
const CT = `multipart/form-data; boundary=${BOUNDARY}`

function multipart(file: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    ),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ])
}

/** The runtime answers an upload like the real one: 201 with the stored attachment. */
function created(echo: Echo): void {
  echo.handler = (_req, res, got) => {
    res.writeHead(201, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ id: 'att-1', size: got.body.length }))
  }
}

test('an upload with Content-Length is streamed through byte for byte', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  created(echo)
  const body = multipart(randomBytes(50 * 1024))
  const res = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { authorization: auth.operator, 'content-type': CT, 'content-length': String(body.length) },
    body,
  })
  assert.equal(res.status, 201)
  assert.deepEqual(JSON.parse(res.text), { id: 'att-1', size: body.length })
  const got = echo.received[0]!
  assert.equal(got.url, '/base/k1/attachments')
  assert.deepEqual(got.body, body)
  assert.equal(got.headers['content-type'], CT)
  assert.equal(got.headers['content-length'], String(body.length))
  assert.equal(got.headers['x-kasm-runtime-session-token'], MESSAGING_TOKEN)
})

/** How an upload's length is told: by chunks, or by a Content-Length (every browser's FormData). */
const FRAMINGS = ['chunked', 'content-length'] as const

/** The headers of an upload of `length` bytes in `framing`. */
function uploadHeaders(
  auth: string,
  framing: (typeof FRAMINGS)[number],
  length: number,
): Record<string, string> {
  const headers: Record<string, string> = { authorization: auth, 'content-type': CT }
  if (framing === 'content-length') headers['content-length'] = String(length)
  return headers
}

for (const framing of FRAMINGS) {
  test(`a ${framing} upload reaches the runtime while the client is still sending (never buffered whole)`, async (t) => {
    const { gw, echo, auth } = await startProxy(t, ENV)
    created(echo)
    const body = multipart(randomBytes(40 * 1024))
    const first = body.subarray(0, 8 * 1024)
    const res = await send(gw.url, {
      method: 'POST',
      path: '/desktop/k1/mcp/attachments',
      headers: uploadHeaders(auth.operator, framing, body.length),
      body: async (req) => {
        await write(req, first)
        // The first chunk is upstream before the rest exists: the gateway streams, it does not collect.
        await waitFor('the first chunk upstream', () => (echo.received[0]?.body.length ?? 0) >= first.length)
        assert.equal(echo.received[0]!.complete, false)
        await write(req, body.subarray(first.length))
      },
    })
    assert.equal(res.status, 201)
    const got = echo.received[0]!
    assert.deepEqual(got.body, body)
    if (framing === 'chunked') assert.equal(got.headers['transfer-encoding'], 'chunked')
    else assert.equal(got.headers['content-length'], String(body.length))
  })
}

test('a Content-Length over the limit is 413 before anything is sent upstream', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  const declared = MAX + 64 * 1024
  const res = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { authorization: auth.operator, 'content-type': CT, 'content-length': String(declared) },
    body: async (req) => {
      await write(req, Buffer.alloc(16 * 1024, 1))
    },
  })
  assert.equal(res.status, 413)
  assert.equal(JSON.parse(res.text).error, 'payload_too_large')
  assert.equal(JSON.parse(res.text).limit, uploadLimit(MAX))
  assert.equal(echo.received.length, 0)
})

test('a chunked upload crossing the limit mid-way aborts the upstream request and answers 413', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  created(echo)
  const chunk = Buffer.alloc(8 * 1024, 7)
  const res = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { authorization: auth.operator, 'content-type': CT },
    body: async (req) => {
      await write(req, chunk)
      await waitFor('the upload to start upstream', () => echo.received.length === 1)
      for (let sent = chunk.length; sent < MAX * 3 && !req.destroyed; sent += chunk.length) {
        await write(req, chunk)
      }
    },
  })
  assert.equal(res.status, 413)
  assert.equal(JSON.parse(res.text).error, 'payload_too_large')
  const got = await waitFor('the upstream request to be cut', () =>
    echo.received[0]?.aborted ? echo.received[0] : undefined,
  )
  assert.equal(got.complete, false)
  assert.ok(got.body.length <= MAX + 16 * 1024, `upstream got ${got.body.length} bytes`)
})

test('bytes past a declared Content-Length never reach the runtime as part of the upload', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  created(echo)
  const body = multipart(Buffer.from('the declared file'))
  // Node's parser ends the body at its Content-Length: what follows is another request to it, here a
  // malformed one, refused with 400 on a closing connection.
  const extra = Buffer.alloc(32 * 1024, 0x78)
  const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
  const head =
    'POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gateway\r\n' +
    `Authorization: ${auth.operator}\r\nContent-Type: ${CT}\r\nContent-Length: ${body.length}\r\n\r\n`
  socket.end(Buffer.concat([Buffer.from(head), body, extra]))
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', () => {})
  await once(socket, 'close')
  assert.match(Buffer.concat(chunks).toString('latin1'), /HTTP\/1\.1 400 .*"error":"bad_request"/s)
  // Whether the upload got upstream before the refusal cut the connection is a race; what it sent never
  // went past the declared bytes.
  assert.ok(echo.received.length <= 1)
  for (const got of echo.received) {
    assert.ok(got.body.length <= body.length, `upstream got ${got.body.length} bytes`)
    assert.deepEqual(got.body, body.subarray(0, got.body.length))
  }
})

test('an upload within the limit after a refused one still works (no leaked state)', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  created(echo)
  const over = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { authorization: auth.operator, 'content-type': CT, 'content-length': String(10 * MAX) },
    body: async () => {},
  })
  assert.equal(over.status, 413)
  const body = multipart(Buffer.from('small file'))
  const ok = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: { authorization: auth.operator, 'content-type': CT, 'content-length': String(body.length) },
    body,
  })
  assert.equal(ok.status, 201)
  assert.deepEqual(echo.received[0]!.body, body)
})

for (const framing of FRAMINGS) {
  test(`a client aborting a ${framing} upload mid-way aborts the upstream request and is not counted as a runtime failure`, async (t) => {
    const { gw, echo, auth } = await startProxy(t, ENV)
    created(echo)
    await assert.rejects(
      send(gw.url, {
        method: 'POST',
        path: '/desktop/k1/mcp/attachments',
        headers: uploadHeaders(auth.operator, framing, MAX),
        body: async (req) => {
          await write(req, Buffer.alloc(8 * 1024, 3))
          await waitFor('the upload to start upstream', () => (echo.received[0]?.body.length ?? 0) > 0)
          throw new Error('client gives up')
        },
      }),
    )
    await waitFor('the upstream request to be cut', () => echo.received[0]?.aborted)
    assert.equal(echo.received[0]!.complete, false)
    const errors = await gw.app.metrics.upstreamErrors.get()
    // Every known reason is exported from the start; none of them moved.
    assert.deepEqual(
      errors.values.filter((v) => v.value !== 0),
      [],
    )
    assert.ok(errors.values.length > 0)
    // No response went out, yet the attempt is on record.
    const record = await waitFor('the abort to be audited', async () =>
      (await gw.app.audit.recent({ limit: 10 })).find((r) => r.route === 'attachments'),
    )
    assert.deepEqual(
      [record.outcome, record.status, record.error, record.kasmId, typeof record.sub],
      ['aborted', 499, 'client_aborted', 'k1', 'string'],
    )
    assert.equal((await gw.app.audit.recent({ limit: 10 })).length, 1)
  })
}

for (const framing of FRAMINGS) {
  test(`a runtime that breaks off a ${framing} upload mid-way gets the client a 502, not a dropped connection`, async (t) => {
    const { gw, echo, auth } = await startProxy(t, ENV)
    const res = await send(gw.url, {
      method: 'POST',
      path: '/desktop/k1/mcp/attachments',
      headers: uploadHeaders(auth.operator, framing, MAX),
      body: async (req) => {
        await write(req, Buffer.alloc(8 * 1024, 5))
        await waitFor('the upload to start upstream', () => (echo.received[0]?.body.length ?? 0) > 0)
        // The runtime goes away with the upload half read.
        await echo.close()
        for (let sent = 8 * 1024; sent < MAX && !req.destroyed; sent += 8 * 1024) {
          await write(req, Buffer.alloc(8 * 1024, 5))
        }
      },
    })
    assert.equal(res.status, 502, res.text)
    assert.equal(JSON.parse(res.text).error, 'upstream_unreachable', res.text)
  })
}

test('a compressed upload is refused (the gateway does not decode bodies)', async (t) => {
  const { gw, echo, auth } = await startProxy(t, ENV)
  const body = multipart(Buffer.from('x'))
  const res = await send(gw.url, {
    method: 'POST',
    path: '/desktop/k1/mcp/attachments',
    headers: {
      authorization: auth.operator,
      'content-type': CT,
      'content-encoding': 'gzip',
      'content-length': String(body.length),
    },
    body,
  })
  assert.equal(res.status, 415)
  assert.equal(echo.received.length, 0)
})
