import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { test } from 'node:test'
import {
  BadRequest,
  PayloadTooLarge,
  UpstreamTimeout,
  UpstreamTokenRefused,
  UpstreamUnreachable,
} from '../../src/errors.ts'
import { ByteLimit, uploadLimit } from '../../src/upstream/body.ts'
import { answerFailure, transportFailure } from '../../src/upstream/failures.ts'

const coded = (code: string, message = code) => Object.assign(new Error(message), { code })

test('transportFailure: refused, reset and unresolvable are 502 upstream_unreachable', () => {
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'UND_ERR_SOCKET', 'EHOSTUNREACH']) {
    const f = transportFailure(coded(code))
    assert.ok(f.error instanceof UpstreamUnreachable, code)
    assert.equal(f.reason, 'unreachable')
  }
})

test('transportFailure: connect and header timeouts are 504 upstream_timeout', () => {
  for (const code of ['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']) {
    const f = transportFailure(coded(code))
    assert.ok(f.error instanceof UpstreamTimeout, code)
    assert.equal(f.reason, 'timeout')
  }
})

test('transportFailure looks through wrappers and AggregateErrors', () => {
  const wrapped = Object.assign(new Error('Internal'), {
    code: 'FST_REPLY_FROM_INTERNAL_SERVER_ERROR',
    cause: coded('ECONNREFUSED'),
  })
  assert.ok(transportFailure(wrapped).error instanceof UpstreamUnreachable)
  const aggregate = new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'connect')
  assert.ok(transportFailure(aggregate).error instanceof UpstreamUnreachable)
})

test('transportFailure: the upload limit is 413, a short body 400, the unknown is ours (500)', () => {
  const limit = new PayloadTooLarge(10)
  assert.equal(transportFailure(Object.assign(new Error('x'), { cause: limit })).error, limit)
  assert.equal(transportFailure(limit).reason, undefined)
  assert.ok(transportFailure(coded('UND_ERR_REQ_CONTENT_LENGTH_MISMATCH')).error instanceof BadRequest)
  const bug = new TypeError('oops')
  const f = transportFailure(bug)
  assert.equal(f.error, bug)
  assert.equal(f.reason, undefined)
})

test('answerFailure: 401/403 from the runtime blame the gateway credential', () => {
  for (const status of [401, 403]) {
    const f = answerFailure(status, { 'content-type': 'application/json' })
    assert.ok(f?.error instanceof UpstreamTokenRefused)
    assert.equal(f?.reason, 'token_refused')
  }
})

test("answerFailure: Kasm's proxy answering (502, 504, non-JSON 503) becomes a gateway error", () => {
  const json = { 'content-type': 'application/json' }
  assert.ok(answerFailure(502, { 'content-type': 'text/html' })?.error instanceof UpstreamUnreachable)
  assert.ok(answerFailure(502, json)?.error instanceof UpstreamUnreachable)
  assert.ok(answerFailure(503, {})?.error instanceof UpstreamUnreachable)
  assert.ok(answerFailure(503, { 'content-type': 'text/html' })?.error instanceof UpstreamUnreachable)
  assert.ok(answerFailure(504, { 'content-type': 'text/plain' })?.error instanceof UpstreamTimeout)
  assert.ok(answerFailure(504, json)?.error instanceof UpstreamTimeout)
  assert.equal(answerFailure(502, json)?.reason, 'unreachable')
  assert.equal(answerFailure(504, json)?.reason, 'timeout')
})

test("answerFailure: the runtime's own answers pass through", () => {
  const json = { 'content-type': 'application/json; charset=utf-8' }
  for (const status of [200, 201, 202, 400, 404, 409, 413, 422, 500]) {
    assert.equal(answerFailure(status, json), undefined, String(status))
  }
  assert.equal(answerFailure(503, json), undefined)
  assert.equal(answerFailure(503, { 'content-type': 'application/problem+json' }), undefined)
})

test('ByteLimit passes bytes through up to its limit', async () => {
  const counter = new ByteLimit(10)
  const out: Buffer[] = []
  await pipeline(Readable.from([Buffer.from('12345'), Buffer.from('67890')]), counter, async (source) => {
    for await (const c of source) out.push(c as Buffer)
  })
  assert.equal(Buffer.concat(out).toString(), '1234567890')
  assert.equal(counter.seen, 10)
})

test('ByteLimit fails with 413 on the byte that crosses the limit', async () => {
  const counter = new ByteLimit(10)
  await assert.rejects(
    pipeline(Readable.from([Buffer.from('123456'), Buffer.from('78901')]), counter, async (source) => {
      for await (const _ of source) {
        // drain
      }
    }),
    (err: unknown) => err instanceof PayloadTooLarge,
  )
})

test('uploadLimit leaves room for the multipart framing', () => {
  assert.ok(uploadLimit(1024) > 1024)
  assert.ok(uploadLimit(1024) - 1024 <= 64 * 1024)
})
