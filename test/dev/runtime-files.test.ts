import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { request } from 'node:http'
import { test } from 'node:test'
import { call, MESSAGING, startRuntime } from './helpers.ts'

type Json = Record<string, unknown>

async function upload(base: string, data: Buffer, type: string, name: string, field = 'file') {
  const form = new FormData()
  form.append(field, new Blob([data], { type }), name)
  const res = await fetch(`${base}attachments`, {
    method: 'POST',
    headers: { 'x-kasm-runtime-session-token': MESSAGING },
    body: form,
  })
  return { status: res.status, body: (await res.json()) as Json }
}

/** GET with the path sent exactly as written (fetch would normalise `..`). */
function rawGet(
  base: string,
  path: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method: 'GET' }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('an upload is described (201) and downloaded as an attachment, inline only for safe images', async (t) => {
  const rt = await startRuntime(t)
  const html = Buffer.from('<script>alert(1)</script>')
  const up = await upload(rt.url, html, 'text/html', 'page.html')
  assert.equal(up.status, 201)
  assert.deepEqual(Object.keys(up.body).sort(), ['id', 'mime', 'name', 'sha256', 'size'])
  assert.equal(up.body.mime, 'text/html')
  assert.equal(up.body.name, 'page.html')
  assert.equal(up.body.size, html.length)
  assert.equal(up.body.sha256, createHash('sha256').update(html).digest('hex'))

  for (const query of ['', '?inline=1']) {
    const res = await fetch(`${rt.url}attachments/${up.body.id}${query}`)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'text/html')
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    assert.equal(res.headers.get('content-security-policy'), 'sandbox')
    assert.match(res.headers.get('content-disposition') ?? '', /^attachment; filename="page.html"/)
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), html)
  }
  for (const type of ['image/png', 'image/jpeg', 'image/gif', 'image/webp']) {
    const image = await upload(rt.url, Buffer.from([1, 2, 3]), type, 'x')
    const inline = await fetch(`${rt.url}attachments/${image.body.id}?inline=1`)
    assert.equal(inline.headers.get('content-type'), type)
    assert.match(inline.headers.get('content-disposition') ?? '', /^inline;/, type)
    assert.equal(inline.headers.get('content-security-policy'), 'sandbox')
    const plain = await fetch(`${rt.url}attachments/${image.body.id}`)
    assert.match(plain.headers.get('content-disposition') ?? '', /^attachment;/)
  }
  const svg = await upload(rt.url, Buffer.from('<svg/>'), 'image/svg+xml', 'x.svg')
  const svgInline = await fetch(`${rt.url}attachments/${svg.body.id}?inline=1`)
  assert.match(svgInline.headers.get('content-disposition') ?? '', /^attachment;/, 'svg can carry script')
  assert.equal((await fetch(`${rt.url}attachments/att_nope`)).status, 404)

  const sent = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'k', text: 'see attached', attachments: [up.body.id] },
  })
  assert.equal(sent.status, 202)
  assert.deepEqual(sent.body.attachments, [up.body.id])
})

test('an upload over the limit is 413 and kept nowhere; other parts are refused', async (t) => {
  const rt = await startRuntime(t, { attachmentBytes: 1024 })
  const over = await upload(rt.url, Buffer.alloc(1025, 7), 'application/octet-stream', 'big.bin')
  assert.equal(over.status, 413)
  assert.equal(over.body.id, undefined)
  const big = await upload(rt.url, Buffer.alloc(300_000, 7), 'application/octet-stream', 'bigger.bin')
  assert.equal(big.status, 413)
  const exact = await upload(rt.url, Buffer.alloc(1024, 7), 'application/octet-stream', 'ok.bin')
  assert.equal(exact.status, 201)
  assert.equal(exact.body.size, 1024)

  const wrongName = await upload(rt.url, Buffer.from('x'), 'text/plain', 'a.txt', 'upload')
  assert.equal(wrongName.status, 400)
  const twoParts = async (build: (form: FormData) => void) => {
    const form = new FormData()
    build(form)
    const res = await fetch(`${rt.url}attachments`, {
      method: 'POST',
      headers: { 'x-kasm-runtime-session-token': MESSAGING },
      body: form,
    })
    return { status: res.status, body: (await res.json()) as Json }
  }
  const file = new Blob(['abc'], { type: 'text/plain' })
  const bodies: Array<[string, Array<[string, string | Blob]>]> = [
    [
      'a field before',
      [
        ['note', 'x'],
        ['file', file],
      ],
    ],
    [
      'a field after',
      [
        ['file', file],
        ['note', 'x'],
      ],
    ],
    [
      'two files',
      [
        ['file', file],
        ['file', file],
      ],
    ],
    ['no file', [['note', 'x']]],
  ]
  for (const [label, parts] of bodies) {
    const res = await twoParts((form) => {
      for (const [name, value] of parts) {
        if (typeof value === 'string') form.append(name, value)
        else form.append(name, value, 'a.txt')
      }
    })
    assert.equal(res.status, 400, label)
    assert.equal(res.body.error, 'one_part_only', label)
  }
  const notMultipart = await call(rt.url, 'POST', 'attachments', { token: MESSAGING, body: { file: 'x' } })
  assert.equal(notMultipart.status, 415)
  const noAuth = await fetch(`${rt.url}attachments`, { method: 'POST', body: new FormData() })
  assert.equal(noAuth.status, 401)
})

test('artifacts: trace, report, screenshots and files with content types by extension', async (t) => {
  const rt = await startRuntime(t)
  rt.emit('step', { n: 1, action: 'click(text="OK")', result: 'clicked' })
  rt.emit('screenshot', {
    file: 'screenshots/0001.png',
    label: 'after click',
    step: 1,
    width: 64,
    height: 40,
  })
  rt.putArtifact('notes.md', '# notes')
  rt.putArtifact('out.txt', 'text')
  rt.putArtifact('app.stdout.tail', 'tail')
  rt.putArtifact('photo.jpg', Buffer.from([0xff, 0xd8, 0xff]))
  rt.putArtifact('data.bin', Buffer.from([0, 1, 2]))
  rt.putArtifact('page.html', '<script>alert(1)</script>')

  const expect: Array<[string, string, string]> = [
    ['trace.jsonl', 'text/plain; charset=utf-8', 'no-store'],
    ['report.json', 'application/json', 'no-store'],
    ['runtime.log', 'text/plain; charset=utf-8', 'no-store'],
    ['notes.md', 'text/plain; charset=utf-8', 'no-store'],
    ['out.txt', 'text/plain; charset=utf-8', 'no-store'],
    ['app.stdout.tail', 'text/plain; charset=utf-8', 'no-store'],
    ['photo.jpg', 'image/jpeg', 'no-store'],
    ['data.bin', 'application/octet-stream', 'no-store'],
    ['page.html', 'application/octet-stream', 'no-store'],
    ['screenshots/0001.png', 'image/png', 'public, max-age=31536000, immutable'],
  ]
  for (const [path, type, cache] of expect) {
    const res = await fetch(`${rt.url}artifacts/${path}`)
    assert.equal(res.status, 200, path)
    assert.equal(res.headers.get('content-type'), type, path)
    assert.equal(res.headers.get('cache-control'), cache, path)
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path)
    assert.equal(res.headers.get('content-security-policy'), 'sandbox', path)
    const download = type === 'application/octet-stream'
    assert.equal(/^attachment;/.test(res.headers.get('content-disposition') ?? ''), download, path)
  }
  const png = Buffer.from(await (await fetch(`${rt.url}artifacts/screenshots/0001.png`)).arrayBuffer())
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  const report = (await (await fetch(`${rt.url}artifacts/report.json`)).json()) as Json
  assert.equal(report.run_id, rt.run)
  assert.deepEqual(report.steps, [{ n: 1, action: 'click(text="OK")', result: 'clicked' }])
  assert.deepEqual(report.screenshots, ['screenshots/0001.png'])
  assert.equal((await fetch(`${rt.url}artifacts/screenshots/0002.png`)).status, 404)
  rt.newRun()
  assert.equal(
    (await fetch(`${rt.url}artifacts/screenshots/0001.png`)).status,
    404,
    'a new run, a new directory',
  )
  assert.equal((await fetch(`${rt.url}artifacts/notes.md`)).status, 404)
})

test('artifacts: no listing, no dotfiles, no directories, no traversal (plain or encoded)', async (t) => {
  const rt = await startRuntime(t)
  rt.emit('screenshot', { file: 'screenshots/0001.png' })
  rt.putArtifact('.env', 'SECRET=1')
  rt.putArtifact('sub/.git/config', 'x')
  rt.putArtifact('sub/file.txt', 'fine')
  assert.equal((await rawGet(rt.url, '/artifacts/sub/file.txt')).status, 200)
  assert.equal(
    (await rawGet(rt.url, '/artifacts/sub%2Ffile.txt')).status,
    404,
    'an encoded separator is not a separator',
  )
  const refused = [
    '/artifacts',
    '/artifacts/',
    '/artifacts/screenshots',
    '/artifacts/screenshots/',
    '/artifacts/sub',
    '/artifacts/.env',
    '/artifacts/%2eenv',
    '/artifacts/%2Eenv',
    '/artifacts/sub/.git/config',
    '/artifacts/../package.json',
    '/artifacts/screenshots/../trace.jsonl',
    '/artifacts/./trace.jsonl',
    '/artifacts/%2e%2e/package.json',
    '/artifacts/%2E%2E%2Fpackage.json',
    '/artifacts/screenshots%2f..%2f..%2fpackage.json',
    '/artifacts/..%5cpackage.json',
    '/artifacts/%252e%252e/package.json',
    '/artifacts//etc/passwd',
    '/artifacts/trace.jsonl%00.png',
    '/artifacts/%E0%A4%A',
  ]
  for (const path of refused) {
    const res = await rawGet(rt.url, path)
    assert.equal(res.status, 404, path)
    assert.doesNotMatch(res.body, /SECRET|"name"|root:/, path)
    if (path.startsWith('/artifacts/')) {
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path)
      assert.equal(res.headers['content-security-policy'], 'sandbox', path)
    }
  }
  assert.throws(() => rt.putArtifact('../escape.txt', 'x'))
})
