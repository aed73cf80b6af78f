import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { type TestContext, test } from 'node:test'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { send } from '../upstream/support.ts'

const MESSAGING = 'e2e-messaging-token-5d1c0a9b'
const SESSION = 'e2e-session-token-never-in-the-gateway'
/** A 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
)

interface E2E {
  gw: TestGateway
  rt: SimulatedRuntime
  /** Calls the gateway as an operator of team blue; records every answer for the token check. */
  call(path: string, init?: RequestInit): Promise<{ status: number; headers: Headers; text: string }>
  base: string
  /** Tokens the gateway may inject (a test that rotates adds the new one). */
  tokens: Set<string>
}

async function setup(
  t: TestContext,
  env: Record<string, string> = {},
  runtime: Parameters<typeof startSimulatedRuntime>[0] = {},
): Promise<E2E> {
  const rt = await startSimulatedRuntime({ messagingToken: MESSAGING, sessionToken: SESSION, ...runtime })
  t.after(() => rt.close())
  const gw = await startGateway(env)
  t.after(() => gw.close())
  await gw.app.sessions.put({
    kasmId: 's1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: MESSAGING,
    source: 'admin',
  })
  const authorization = `Bearer ${await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] })}`
  const seen: string[] = []
  const tokens = new Set([MESSAGING])
  t.after(() => {
    for (const s of seen) {
      for (const token of [...tokens, SESSION]) assert.ok(!s.includes(token), 'a token reached a client')
    }
    // Every request the runtime got through the gateway carried the messaging token and no client credential.
    for (const r of rt.received) {
      assert.ok(tokens.has(String(r.headers['x-kasm-runtime-session-token'])), r.url)
      assert.equal(r.headers.authorization, undefined)
      assert.equal(r.headers.cookie, undefined)
      assert.ok(!r.url.includes('token'), r.url)
    }
  })
  const base = `${gw.url}/desktop/s1/mcp/`
  return {
    gw,
    rt,
    base,
    tokens,
    async call(path, init = {}) {
      const res = await fetch(`${base}${path}`, {
        ...init,
        headers: { authorization, ...(init.headers as Record<string, string> | undefined) },
      })
      const text = await res.text()
      seen.push(text, JSON.stringify([...res.headers]))
      return { status: res.status, headers: res.headers, text }
    },
  }
}

const json = (body: unknown): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
})

test('messages: 202, idempotent 200, 409 with run and epoch, 413, 400, and every read route', async (t) => {
  const e = await setup(t, {}, { inboxMessageChars: 50 })
  const inbox = await e.call('inbox?kasm_runtime_token=leak')
  assert.equal(inbox.status, 200)
  const { run, epoch } = JSON.parse(inbox.text)
  assert.equal(run, e.rt.run)
  assert.equal(epoch, e.rt.epoch)

  const key = randomUUID()
  const first = await e.call('messages', json({ run, key, text: 'hello' }))
  assert.equal(first.status, 202)
  const stored = JSON.parse(first.text)
  assert.equal(stored.key, key)
  assert.equal(stored.sender, 'operator')
  const retry = await e.call('messages', json({ run, key, text: 'hello' }))
  assert.equal(retry.status, 200)
  assert.equal(JSON.parse(retry.text).id, stored.id)
  assert.equal((await e.call('messages', json({ run, key, text: 'changed' }))).status, 409)

  const stale = await e.call('messages', json({ run: 'an-old-run', key: randomUUID(), text: 'x' }))
  assert.equal(stale.status, 409)
  assert.deepEqual((({ run: r, epoch: ep }) => ({ run: r, epoch: ep }))(JSON.parse(stale.text)), {
    run,
    epoch,
  })
  const long = await e.call('messages', json({ run, key: randomUUID(), text: 'x'.repeat(51) }))
  assert.equal(long.status, 413)
  // Unknown fields pass through untouched: the runtime itself refuses them.
  const unknown = await e.call('messages', json({ run, key: randomUUID(), text: 'x', colour: 'red' }))
  assert.equal(unknown.status, 400)
  assert.equal(JSON.parse(unknown.text).error, 'unknown_field')

  const since = await e.call('messages?since=0')
  assert.equal(since.status, 200)
  assert.ok(JSON.parse(since.text).messages.some((m: { id: string }) => m.id === stored.id))
  assert.equal((await e.call('messages?state=pending,queued,dispatched,responded')).status, 200)
  assert.equal((await e.call('messages?state=bogus')).status, 400)
  assert.equal((await e.call(`messages/${stored.id}`)).status, 200)
  const byKey = await e.call(`runs/${run}/messages/${key}`)
  assert.equal(byKey.status, 200)
  assert.equal(JSON.parse(byKey.text).id, stored.id)
  assert.equal((await e.call(`runs/${run}/messages/never-sent`)).status, 404)
})

test('requests and replies: 422 with fields, 202, 409 on a second reply; session-token writes never forwarded', async (t) => {
  const e = await setup(t)
  const asked = e.rt.ask({
    title: 'Which browser?',
    fields: [{ id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'] }],
  })
  const open = await e.call('requests?state=open')
  assert.equal(open.status, 200)
  assert.ok(
    JSON.parse(open.text).requests.some((r: { request_id: string }) => r.request_id === asked.request_id),
  )
  assert.equal((await e.call(`requests/${asked.request_id}`)).status, 200)

  const run = e.rt.run
  const reply = (key: string, browser: string) =>
    e.call(
      'messages',
      json({ run, key, reply_to: asked.request_id, revision: asked.revision, values: { browser } }),
    )
  const invalid = await reply(randomUUID(), 'netscape')
  assert.equal(invalid.status, 422)
  assert.equal(JSON.parse(invalid.text).fields[0].field, 'browser')
  assert.equal((await reply(randomUUID(), 'firefox')).status, 202)
  assert.equal((await reply(randomUUID(), 'chrome')).status, 409)

  const before = e.rt.received.length
  const create = await e.call('requests', json({ title: 'x', fields: [] }))
  const cancel = await e.call(`requests/${asked.request_id}/cancel`, { method: 'POST' })
  for (const refused of [create, cancel]) {
    assert.equal(refused.status, 403)
    assert.equal(JSON.parse(refused.text).error, 'session_token_only')
  }
  assert.equal(e.rt.received.length, before)
})

test('actions: stop accepted, wrong state 409 passed through, ack refused by the gateway', async (t) => {
  const e = await setup(t)
  const run = e.rt.run
  e.rt.setLoop('idle')
  const wrong = await e.call('actions', json({ run, key: randomUUID(), action: 'stop' }))
  assert.equal(wrong.status, 409)
  assert.equal(JSON.parse(wrong.text).state, 'idle')
  e.rt.setLoop('running')
  const key = randomUUID()
  assert.equal((await e.call('actions', json({ run, key, action: 'stop' }))).status, 202)
  assert.equal((await e.call('actions', json({ run, key, action: 'stop' }))).status, 200)

  const before = e.rt.received.filter((r) => r.url === '/actions').length
  const ack = await e.call(
    'actions',
    json({ run, key: randomUUID(), action: 'ack', args: { ids: ['m1'], state: 'queued' } }),
  )
  assert.equal(ack.status, 403)
  assert.equal(JSON.parse(ack.text).error, 'session_token_only')
  assert.equal(e.rt.received.filter((r) => r.url === '/actions').length, before)
})

test('attachments: multipart upload, download with spec headers, inline only for images', async (t) => {
  const e = await setup(t)
  const upload = async (data: Buffer, type: string, name: string) => {
    const form = new FormData()
    form.append('file', new Blob([data], { type }), name)
    return e.call('attachments', { method: 'POST', body: form })
  }
  const png = await upload(PNG, 'image/png', 'dot.png')
  assert.equal(png.status, 201)
  const meta = JSON.parse(png.text)
  assert.equal(meta.mime, 'image/png')
  assert.equal(meta.size, PNG.length)

  const download = await fetch(`${e.base}attachments/${meta.id}`, {
    headers: { authorization: `Bearer ${await bearer({ roles: ['viewer'], teams: ['blue'] })}` },
  })
  assert.equal(download.status, 200)
  assert.deepEqual(Buffer.from(await download.arrayBuffer()), PNG)
  assert.equal(download.headers.get('content-type'), 'image/png')
  assert.equal(download.headers.get('x-content-type-options'), 'nosniff')
  assert.match(download.headers.get('content-security-policy') ?? '', /sandbox/)
  assert.match(download.headers.get('content-disposition') ?? '', /^attachment;/)
  const inline = await e.call(`attachments/${meta.id}?inline=1`)
  assert.match(inline.headers.get('content-disposition') ?? '', /^inline;/)

  const html = JSON.parse((await upload(Buffer.from('<script>1</script>'), 'text/html', 'x.html')).text)
  const notInline = await e.call(`attachments/${html.id}?inline=1`)
  assert.equal(notInline.status, 200)
  assert.match(notInline.headers.get('content-disposition') ?? '', /^attachment;/)
  assert.match(notInline.headers.get('content-security-policy') ?? '', /sandbox/)
})

test("an attachment over the runtime's limit: its 413 passes through", async (t) => {
  const e = await setup(t, {}, { attachmentBytes: 4096 })
  const form = new FormData()
  form.append('file', new Blob([Buffer.alloc(8192, 1)], { type: 'application/octet-stream' }), 'big.bin')
  const refused = await e.call('attachments', { method: 'POST', body: form })
  assert.equal(refused.status, 413)
  assert.equal(JSON.parse(refused.text).error, 'attachment_too_large')
})

test("an attachment over the gateway's limit is 413 and never reaches the runtime whole", async (t) => {
  const e = await setup(t, { GATEWAY_MAX_ATTACHMENT_BYTES: String(64 * 1024) })
  const authorization = `Bearer ${await bearer({ roles: ['operator'], teams: ['blue'] })}`
  const overDeclared = await send(e.gw.url, {
    method: 'POST',
    path: '/desktop/s1/mcp/attachments',
    headers: {
      authorization,
      'content-type': 'multipart/form-data; boundary=b',
      'content-length': String(1024 * 1024),
    },
    body: async () => {},
  })
  assert.equal(overDeclared.status, 413)
  assert.equal(JSON.parse(overDeclared.text).error, 'payload_too_large')
  assert.equal(e.rt.received.filter((r) => r.url === '/attachments').length, 0)

  const chunk = Buffer.alloc(16 * 1024, 2)
  const overChunked = await send(e.gw.url, {
    method: 'POST',
    path: '/desktop/s1/mcp/attachments',
    headers: { authorization, 'content-type': 'multipart/form-data; boundary=b' },
    body: async (req) => {
      for (let i = 0; i < 12 && !req.destroyed; i++) req.write(chunk)
    },
  })
  assert.equal(overChunked.status, 413)
  assert.equal(JSON.parse(overChunked.text).error, 'payload_too_large')
  // The chunked one is streamed, so it may have started upstream (whether the runtime saw its head before
  // the cut is a race); either way it was cut before its end.
  const forwarded = e.rt.received.filter((r) => r.url === '/attachments')
  assert.ok(forwarded.length <= 1)
  for (const r of forwarded) assert.ok(r.bodyBytes < 12 * chunk.length)
})

test('artifacts: files with their spec headers; traversal never reaches the runtime', async (t) => {
  const e = await setup(t)
  e.rt.putArtifact('notes.md', '# hi\n')
  e.rt.putArtifact('screenshots/s1.png', PNG)
  const notes = await e.call('artifacts/notes.md')
  assert.equal(notes.status, 200)
  assert.equal(notes.text, '# hi\n')
  assert.match(notes.headers.get('content-type') ?? '', /^text\/plain/)
  assert.equal(notes.headers.get('cache-control'), 'no-store')
  assert.equal(notes.headers.get('x-content-type-options'), 'nosniff')
  assert.match(notes.headers.get('content-security-policy') ?? '', /sandbox/)
  const shot = await e.call('artifacts/screenshots/s1.png')
  assert.equal(shot.status, 200)
  assert.match(shot.headers.get('cache-control') ?? '', /immutable/)
  assert.equal((await e.call('artifacts/nothing-here.txt')).status, 404)

  const before = e.rt.received.length
  const authorization = `Bearer ${await bearer({ roles: ['viewer'], teams: ['blue'] })}`
  for (const path of [
    '../../etc/passwd',
    '%2e%2e/%2e%2e/x',
    '%252e%252e/x',
    'screenshots%2f..%2fx',
    '.env',
    'a\\b',
  ]) {
    const res = await send(e.gw.url, {
      path: `/desktop/s1/mcp/artifacts/${path}`,
      headers: { authorization },
    })
    assert.equal(res.status, 404, path)
  }
  assert.equal(e.rt.received.length, before)
})

test('runtime down or hanging: 502 upstream_unreachable, 503 JSON passthrough, 504 upstream_timeout', async (t) => {
  const e = await setup(t, { GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: '300' })
  e.rt.setDown(502)
  const down = await e.call('inbox')
  assert.equal(down.status, 502)
  assert.equal(JSON.parse(down.text).error, 'upstream_unreachable')
  e.rt.setDown(503)
  const unavailable = await e.call('inbox')
  assert.equal(unavailable.status, 503)
  assert.equal(JSON.parse(unavailable.text).error, 'runtime_unavailable')
  e.rt.setDown(null)
  assert.equal((await e.call('inbox')).status, 200)

  e.rt.setHang(true)
  const hung = await e.call('messages?since=0')
  assert.equal(hung.status, 504)
  assert.equal(JSON.parse(hung.text).error, 'upstream_timeout')
  e.rt.setHang(false)
  assert.equal((await e.call('inbox')).status, 200)
})

test('a rotated runtime token is 502 upstream_token_refused until the session is updated', async (t) => {
  const e = await setup(t)
  e.tokens.add('rotated-token-0b9e')
  e.rt.rotateTokens({ messagingToken: 'rotated-token-0b9e' })
  const run = e.rt.run
  const refused = await e.call('messages', json({ run, key: randomUUID(), text: 'hi' }))
  assert.equal(refused.status, 502)
  assert.equal(JSON.parse(refused.text).error, 'upstream_token_refused')
  const read = await e.call(`runs/${run}/messages/some-key`)
  assert.equal(read.status, 502)
  const metric = await e.gw.app.metrics.upstreamErrors.get()
  assert.equal(metric.values.find((v) => v.labels.reason === 'token_refused')?.value, 2)

  await e.gw.app.sessions.put({
    kasmId: 's1',
    upstream: e.rt.url,
    team: 'blue',
    messagingToken: 'rotated-token-0b9e',
    source: 'admin',
  })
  const after = await e.call('messages', json({ run, key: randomUUID(), text: 'hi' }))
  assert.equal(after.status, 202)
  assert.equal(e.rt.received.at(-1)?.headers['x-kasm-runtime-session-token'], 'rotated-token-0b9e')
})
