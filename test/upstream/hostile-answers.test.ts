import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { HOSTILE_HEADERS } from '../fixtures/hostile-runtime.ts'
import { startHostileStack } from '../fixtures/hostile-stack.ts'

const SANDBOX = "sandbox; default-src 'none'"

async function echoes(app: FastifyInstance, where: string): Promise<number> {
  const text = await app.metrics.registry.getSingleMetricAsString('krg_upstream_token_echoes_total')
  return Number(new RegExp(`where="${where}"\\} (\\d+)`).exec(text)?.[1] ?? 0)
}

/** The gateway's own headers on every v1 answer, whatever the runtime said. */
function assertSandboxed(res: Response, what: string): void {
  assert.equal(res.headers.get('content-security-policy'), SANDBOX, what)
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff', what)
}

test('no header a runtime must not set on our origin passes, on any kind of route', async (t) => {
  const s = await startHostileStack(t)
  s.rt.addHeaders(HOSTILE_HEADERS)
  s.rt.answer('artifacts/report.json', { headers: { 'content-type': 'application/json' }, body: '{}' })
  s.rt.answer('attachments/a1', { headers: { 'content-type': 'image/png' }, body: 'png' })
  s.rt.answer('requests', { status: 503, headers: { 'content-type': 'application/json' }, body: '{}' })
  for (const path of [
    'inbox',
    'artifacts/report.json',
    'attachments/a1?inline=1',
    'requests',
    'messages/m404',
  ]) {
    const res = await s.call(path)
    assert.ok(res.status < 500 || res.status === 503, `${path}: ${res.status}`)
    for (const name of Object.keys(HOSTILE_HEADERS)) {
      if (name === 'content-security-policy') continue
      assert.equal(res.headers.get(name), null, `${path}: ${name} passed`)
    }
    assertSandboxed(res, path)
  }
})

test("a runtime's redirect is 502 upstream_redirect, never a Location from our origin; 304 passes", async (t) => {
  const s = await startHostileStack(t)
  for (const status of [301, 302, 303, 307, 308, 300]) {
    s.rt.answer('inbox', { status, headers: { location: 'https://phish.example/', refresh: '0' } })
    const res = await s.call('inbox')
    assert.equal(res.status, 502, String(status))
    assert.equal(res.headers.get('location'), null)
    assert.equal(JSON.parse(res.text).error, 'upstream_redirect')
  }
  s.rt.answer('artifacts/report.json', { status: 304, headers: { etag: '"r1"', location: '/x' } })
  const notModified = await s.call('artifacts/report.json', { headers: { 'if-none-match': '"r1"' } })
  assert.equal(notModified.status, 304)
  assert.equal(notModified.headers.get('etag'), '"r1"')
  assert.equal(notModified.headers.get('location'), null)
  assert.match(
    await s.gw.app.metrics.registry.getSingleMetricAsString('krg_upstream_errors_total'),
    /reason="redirect"\} 6/,
  )
})

test('artifacts: the gateway picks the type from the extension; script-capable files are downloads', async (t) => {
  const s = await startHostileStack(t)
  const html = '<script>document.title="pwned"</script>'
  const cases: Array<[string, string, string, string | null]> = [
    // file, what the runtime claims, the type the client gets, its disposition
    ['evil.html', 'text/html', 'application/octet-stream', 'attachment; filename=evil.html'],
    ['evil.svg', 'image/svg+xml', 'application/octet-stream', 'attachment; filename=evil.svg'],
    ['evil.xhtml', 'application/xhtml+xml', 'application/octet-stream', 'attachment; filename=evil.xhtml'],
    ['screenshots/s1.png', 'text/html', 'image/png', null],
    ['photo.jpg', 'text/html', 'image/jpeg', null],
    ['report.json', 'text/html', 'application/json', null],
    ['trace.jsonl', 'text/html', 'text/plain; charset=utf-8', null],
    ['notes.md', 'text/html', 'text/plain; charset=utf-8', null],
    ['runtime.log', 'text/html', 'text/plain; charset=utf-8', null],
    ['run.tail', 'text/html', 'text/plain; charset=utf-8', null],
    ['README', 'text/html', 'application/octet-stream', 'attachment; filename=README'],
    ['a b.pdf', 'application/pdf', 'application/octet-stream', 'attachment; filename="a b.pdf"'],
  ]
  for (const [file, claimed, type, disposition] of cases) {
    s.rt.answer(`artifacts/${file}`, {
      headers: { 'content-type': claimed, 'content-disposition': 'inline', 'x-content-type-options': 'none' },
      body: html,
    })
    const res = await s.call(`artifacts/${file.split('/').map(encodeURIComponent).join('/')}`)
    assert.equal(res.status, 200, file)
    assert.equal(res.headers.get('content-type'), type, file)
    assert.equal(res.headers.get('content-disposition'), disposition, file)
    assertSandboxed(res, file)
    assert.equal(res.text, html, `${file}: the body passes as sent`)
  }
  // A runtime's refusal of a file is JSON when it says JSON, text otherwise: never its HTML.
  s.rt.answer('artifacts/missing.html', { status: 404, headers: { 'content-type': 'text/html' }, body: html })
  const missing = await s.call('artifacts/missing.html')
  assert.equal(missing.status, 404)
  assert.equal(missing.headers.get('content-type'), 'text/plain; charset=utf-8')
  assert.equal(missing.headers.get('content-disposition'), null)
  assertSandboxed(missing, 'a refusal')
})

test('attachments: inline only for the four image types with ?inline=1; anything else is a download', async (t) => {
  const s = await startHostileStack(t)
  const stored: Record<string, string> = {
    html: 'text/html; charset=utf-8',
    svg: 'image/svg+xml',
    png: 'image/png',
    webp: 'image/webp',
    junk: 'not a type <script>',
  }
  for (const [id, type] of Object.entries(stored)) {
    s.rt.answer(`attachments/${id}`, {
      headers: { 'content-type': type, 'content-disposition': `inline; filename="${id}.file"` },
      body: '<script>alert(1)</script>',
    })
  }
  const expect: Array<[string, string, string]> = [
    ['html?inline=1', 'text/html', 'attachment; filename=html.file'],
    ['svg?inline=1', 'image/svg+xml', 'attachment; filename=svg.file'],
    ['png?inline=1', 'image/png', 'inline; filename=png.file'],
    ['png', 'image/png', 'attachment; filename=png.file'],
    ['webp?inline=1', 'image/webp', 'inline; filename=webp.file'],
    ['junk?inline=1', 'application/octet-stream', 'attachment; filename=junk.file'],
  ]
  for (const [path, type, disposition] of expect) {
    const res = await s.call(`attachments/${path}`)
    assert.equal(res.status, 200, path)
    assert.equal(res.headers.get('content-type'), type, path)
    assert.equal(res.headers.get('content-disposition'), disposition, path)
    assertSandboxed(res, path)
  }
  // A hostile file name cannot break the header or smuggle a path: separators become `_`, quotes are escaped.
  s.rt.answer('attachments/named', {
    headers: {
      'content-type': 'image/png',
      'content-disposition': 'attachment; filename="../../etc/x\\".png"',
    },
    body: 'x',
  })
  const named = await s.call('attachments/named')
  assert.equal(named.headers.get('content-disposition'), 'attachment; filename=".._.._etc_x\\".png"')
})

test('caching is the gateway decision: private for files, no-store for the API', async (t) => {
  const s = await startHostileStack(t)
  s.rt.answer('artifacts/screenshots/s1.png', {
    headers: {
      'content-type': 'image/png',
      'cache-control': 'public, max-age=31536000, immutable, s-maxage=9',
    },
    body: 'png',
  })
  s.rt.answer('artifacts/report.json', { headers: { 'cache-control': 'public, max-age=600' }, body: '{}' })
  s.rt.answer('artifacts/trace.jsonl', { headers: { 'cache-control': 'no-store' }, body: '' })
  s.rt.answer('inbox', { headers: { 'cache-control': 'public, max-age=600' }, body: '{}' })
  const png = await s.call('artifacts/screenshots/s1.png')
  assert.equal(png.headers.get('cache-control'), 'private, max-age=31536000, immutable')
  assert.equal((await s.call('artifacts/report.json')).headers.get('cache-control'), 'private, max-age=600')
  assert.equal((await s.call('artifacts/trace.jsonl')).headers.get('cache-control'), 'no-store')
  assert.equal((await s.call('inbox')).headers.get('cache-control'), 'no-store')
})

test('ranges and validators pass on files; a compressed answer is 502 (identity is what was asked)', async (t) => {
  const s = await startHostileStack(t)
  s.rt.answer('artifacts/trace.jsonl', {
    status: 206,
    headers: {
      'content-range': 'bytes 0-3/10',
      'accept-ranges': 'bytes',
      etag: 'W/"t1"',
      'last-modified': 'Tue, 01 Jan 2030 00:00:00 GMT',
    },
    body: 'abcd',
  })
  const part = await s.call('artifacts/trace.jsonl', {
    headers: { range: 'bytes=0-3', 'accept-encoding': 'gzip' },
  })
  assert.equal(part.status, 206)
  assert.equal(part.headers.get('content-range'), 'bytes 0-3/10')
  assert.equal(part.headers.get('accept-ranges'), 'bytes')
  assert.equal(part.headers.get('etag'), 'W/"t1"')
  assert.equal(part.headers.get('last-modified'), 'Tue, 01 Jan 2030 00:00:00 GMT')
  assert.equal(part.text, 'abcd')
  const sent = s.rt.received.at(-1)
  assert.equal(sent?.headers['accept-encoding'], 'identity')
  assert.equal(sent?.headers.range, 'bytes=0-3')

  s.rt.answer('inbox', {
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: 'x',
  })
  const gz = await s.call('inbox')
  assert.equal(gz.status, 502)
  assert.equal(JSON.parse(gz.text).error, 'upstream_bad_answer')
})

test('a JSON route answer that is not JSON reaches the client as plain text, never as HTML', async (t) => {
  const s = await startHostileStack(t)
  s.rt.answer('messages', { headers: { 'content-type': 'text/html' }, body: '<script>alert(1)</script>' })
  const res = await s.call('messages?since=0')
  assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8')
  assertSandboxed(res, 'messages')
})

test('a runtime echoing its token: headers holding it or a piece of it are dropped, bodies masked, counted', async (t) => {
  const s = await startHostileStack(t)
  const token = s.rt.token
  const piece = token.slice(5, 13)
  s.rt.answer('inbox', {
    headers: {
      'content-type': 'application/json',
      'x-debug': `got token ${token}`,
      'x-partial': `prefix-${piece}-suffix`,
      etag: `"${piece}"`,
    },
    body: JSON.stringify({ run: 'r', error: `your token ${token} is wrong`, again: token }),
  })
  const before = { header: await echoes(s.gw.app, 'header'), body: await echoes(s.gw.app, 'body') }
  const res = await s.call('inbox')
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('x-debug'), null)
  assert.equal(res.headers.get('x-partial'), null)
  assert.equal(res.headers.get('etag'), null)
  const body = JSON.parse(res.text) as Record<string, string>
  assert.equal(body.again, '*'.repeat(token.length))
  assert.equal(body.error, `your token ${'*'.repeat(token.length)} is wrong`)
  assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(res.text))
  assert.equal(await echoes(s.gw.app, 'header'), before.header + 3)
  assert.equal(await echoes(s.gw.app, 'body'), before.body + 2)
  // A large artifact with the token split across chunks is masked too.
  const big = `${'a'.repeat(100_000)}${token}${'b'.repeat(100_000)}`
  s.rt.answer('artifacts/trace.jsonl', { body: big })
  const trace = await s.call('artifacts/trace.jsonl')
  assert.equal(trace.text.length, big.length)
  assert.ok(trace.text.includes('*'.repeat(token.length)))
})
