import assert from 'node:assert/strict'
import http from 'node:http'
import { test } from 'node:test'
import { startStack, until } from '../events/helpers.ts'
import { type Received, type Receiver, startReceiver, TOLERANCE_S, verify } from './receiver.ts'

/**
 * What a receiver can check (docs/notifications.md): the signature covers the attempt's timestamp and the
 * raw body, so a request captured on the way cannot be replayed once its timestamp is stale, and inside the
 * tolerance its delivery id gives it away.
 */

const SECRET = 'webhook-secret-for-tests-0123456789'
const FIELDS = [{ id: 'x', type: 'string', required: true }]

/** Sends a captured webhook request to the receiver again, byte for byte, with `headers` changed. */
function replay(rx: Receiver, r: Received, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(rx.url, {
      method: 'POST',
      headers: {
        'content-type': String(r.headers['content-type']),
        'x-krg-delivery': String(r.headers['x-krg-delivery']),
        'x-krg-event': String(r.headers['x-krg-event']),
        'x-krg-timestamp': String(r.headers['x-krg-timestamp']),
        'x-krg-signature': String(r.headers['x-krg-signature']),
        ...headers,
      },
    })
    req.on('response', (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.end(r.raw)
  })
}

test('each attempt is signed over its own timestamp and the same body bytes; a replay is caught', async (t) => {
  const rx = await startReceiver(SECRET)
  t.after(() => rx.close())
  rx.script.push(503)
  // The first retry waits 1 to 2 s (equal jitter on 2 s): its timestamp is a later second.
  const { rt } = await startStack(t, {
    GATEWAY_NOTIFY_SECRET: SECRET,
    GATEWAY_NOTIFY_RETRY_MS: '2000',
    GATEWAY_NOTIFY_URL: rx.url,
  })
  const before = Math.floor(Date.now() / 1000)
  rt.ask({ title: 'Sign me', fields: FIELDS })
  await until('the retry', () => rx.received.length === 2)
  const [first, retry] = rx.received as [Received, Received]
  assert.deepEqual(
    rx.received.map((r) => [r.answered, r.verdict]),
    [
      [503, 'ok'],
      [204, 'ok'],
    ],
  )
  const stamps = rx.received.map((r) => Number(r.headers['x-krg-timestamp']))
  assert.ok(
    stamps.every((s) => Number.isInteger(s) && s >= before && s <= Date.now() / 1000),
    `${stamps}`,
  )
  assert.ok((stamps[1] ?? 0) > (stamps[0] ?? 0), `a fresh timestamp on the retry: ${stamps}`)
  assert.equal(retry.raw, first.raw, 'the same body bytes (delivery and at unchanged)')
  assert.equal(retry.headers['x-krg-delivery'], first.headers['x-krg-delivery'])
  assert.notEqual(retry.headers['x-krg-signature'], first.headers['x-krg-signature'])
  assert.match(String(retry.headers['x-krg-signature']), /^v1=[0-9a-f]{64}$/)
  // The old scheme (the body alone) no longer verifies: receivers must move to the new one.
  const bodyOnly = verify(SECRET, { ...retry.headers, 'x-krg-timestamp': '' }, Buffer.from(retry.raw))
  assert.notEqual(bodyOnly, 'ok')

  // The captured request sent again: inside the tolerance its delivery id was seen; later, it is stale; a
  // fresh timestamp does not match the signature.
  assert.equal(await replay(rx, retry), 204)
  assert.equal(rx.received.at(-1)?.verdict, 'duplicate')
  rx.clockSkewS = TOLERANCE_S + 1
  await replay(rx, retry)
  assert.equal(rx.received.at(-1)?.verdict, 'stale')
  await replay(rx, retry, { 'x-krg-timestamp': String(Math.floor(Date.now() / 1000) + TOLERANCE_S + 1) })
  assert.equal(rx.received.at(-1)?.verdict, 'bad_signature')
  rx.clockSkewS = 0
  await replay(rx, retry, { 'x-krg-signature': `v1=${'0'.repeat(64)}` })
  assert.equal(rx.received.at(-1)?.verdict, 'bad_signature')
})

test('an unsigned target gets the timestamp and no signature', async (t) => {
  const rx = await startReceiver()
  t.after(() => rx.close())
  const { rt } = await startStack(t, { GATEWAY_NOTIFY_URL: rx.url })
  rt.ask({ title: 'Unsigned', fields: FIELDS })
  await until('request.opened', () => rx.received.length === 1)
  const [r] = rx.received
  assert.equal(r?.headers['x-krg-signature'], undefined)
  assert.match(String(r?.headers['x-krg-timestamp']), /^\d{10}$/)
  assert.equal(r?.verdict, 'unsigned')
})
