import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ConfigError } from '../../src/config.ts'
import {
  isExtraRouteName,
  isKasmId,
  isSafeParam,
  joinSegments,
  parseArtifactPath,
  proxyRefuses,
  requestTarget,
  upstreamOrigin,
  upstreamUrl,
} from '../../src/upstream/paths.ts'
import { forwardedQuery } from '../../src/upstream/query.ts'
import { extraReadRoutes, V1_ROUTES } from '../../src/upstream/routes.ts'

test('isSafeParam accepts ids, run ids and keys, dots included where they are names', () => {
  for (const ok of [
    'm1',
    'q_2',
    'run-2026.09.16',
    'a:b:c',
    'A.b',
    'x'.repeat(128),
    '..0a9',
    '..x',
    '.x',
    'x..',
    '...',
    'a..b',
    '.hidden',
  ]) {
    assert.equal(isSafeParam(ok), true, ok)
  }
  assert.equal(isSafeParam('k'.repeat(256), 256), true)
})

test('isSafeParam refuses traversal, encodings and oversize', () => {
  for (const bad of [
    '',
    '.',
    '..',
    'a/b',
    '../x',
    'x/..',
    'a\\b',
    '%2e%2e',
    '%2e',
    'a%2fb',
    'a;b',
    'a b',
    'a?b',
    'a#b',
    'é',
    'x'.repeat(129),
  ]) {
    assert.equal(isSafeParam(bad), false, JSON.stringify(bad))
  }
  assert.equal(isSafeParam(undefined), false)
  assert.equal(isSafeParam(42), false)
  assert.equal(isSafeParam('k'.repeat(257), 256), false)
})

test('isKasmId is the strict session id', () => {
  assert.equal(isKasmId('kasm_01-A'), true)
  for (const bad of ['', 'a.b', 'a/b', '..', 'a:b', 'x'.repeat(129)]) assert.equal(isKasmId(bad), false, bad)
})

test('parseArtifactPath accepts plain relative files, dots inside a name included', () => {
  assert.deepEqual(parseArtifactPath('a..b/c'), ['a..b', 'c'])
  assert.deepEqual(parseArtifactPath('report..json'), ['report..json'])
  assert.deepEqual(parseArtifactPath('screenshots/x..'), ['screenshots', 'x..'])
  assert.deepEqual(parseArtifactPath('report.json'), ['report.json'])
  assert.deepEqual(parseArtifactPath('trace.jsonl'), ['trace.jsonl'])
  assert.deepEqual(parseArtifactPath('screenshots/step-1.png'), ['screenshots', 'step-1.png'])
  assert.deepEqual(parseArtifactPath('logs/run%20one.log'), ['logs', 'run one.log'])
  assert.deepEqual(parseArtifactPath('a/b/c/d.txt'), ['a', 'b', 'c', 'd.txt'])
})

test('parseArtifactPath refuses every traversal and encoding trick', () => {
  for (const bad of [
    '',
    '..',
    '../etc/passwd',
    'screenshots/../../etc/passwd',
    '.',
    './report.json',
    '%2e%2e/secret',
    '%2E%2e%2fsecret',
    '%2e%2E/x',
    'report%2ejson',
    '%252e%252e/secret',
    '%25',
    'a%2fb',
    'a%2Fb',
    'a%5cb',
    'a%5Cb',
    'a\\b',
    '..\\x',
    'a//b',
    '/etc/passwd',
    '//evil.test/x',
    'a/',
    'a;b',
    'a%3bb',
    'report.json;x=1',
    '.env',
    'screenshots/.hidden.png',
    '.git/config',
    '..x',
    'a/..x',
    '...',
    'http://evil.test/x',
    'http:/x',
    'a%00b',
    '%ZZ',
    '%e9',
    'caf%C3%A9.png',
    'a?b',
    'a#b',
    'name ',
    ' name',
    `${'x'.repeat(256)}`,
    Array.from({ length: 17 }, () => 'a').join('/'),
  ]) {
    assert.equal(parseArtifactPath(bad), undefined, JSON.stringify(bad))
  }
})

test('joinSegments re-encodes each segment', () => {
  assert.equal(joinSegments(['messages', 'a:b']), 'messages/a%3Ab')
  assert.equal(joinSegments(['artifacts', 'run one.log']), 'artifacts/run%20one.log')
})

test('upstreamUrl stays under the session base', () => {
  assert.equal(upstreamUrl('http://rt:9434/', 'inbox', ''), 'http://rt:9434/inbox')
  assert.equal(
    upstreamUrl('http://rt:9434/desktop/k1/mcp/', 'messages', 'since=3'),
    'http://rt:9434/desktop/k1/mcp/messages?since=3',
  )
  // A base without its trailing slash still keeps its last segment; the base is normalised once.
  assert.equal(upstreamUrl('http://rt/base/k1', 'inbox', ''), 'http://rt/base/k1/inbox')
  assert.equal(upstreamUrl('HTTP://RT:80/base/', 'inbox', ''), 'http://rt/base/inbox')
  // What joinSegments makes passes as it is; `...` is a name, not a dot segment.
  assert.equal(upstreamUrl('http://rt/', joinSegments(['messages', 'a:b']), ''), 'http://rt/messages/a%3Ab')
  assert.equal(upstreamUrl('http://rt/', 'artifacts/run%20one.log', ''), 'http://rt/artifacts/run%20one.log')
  assert.equal(upstreamUrl('http://rt/', 'artifacts/...', ''), 'http://rt/artifacts/...')
  for (const path of [
    '',
    '/etc/passwd',
    '//evil.test/x',
    '../x',
    'a/../x',
    'a/..',
    './x',
    'a/./b',
    '%2e%2e/x',
    'a/%2E/b',
    'a/.%2e',
    'http://evil.test/x',
    'a\\..\\x',
    'a//b',
    'a/',
    'x?y=1',
    'x#y',
    'a b',
    'a\nb',
  ]) {
    assert.throws(() => upstreamUrl('http://rt/base/', path, ''), /plain relative path/, JSON.stringify(path))
  }
})

test("proxyRefuses names the URLs reply-from's guard would refuse; requestTarget and upstreamOrigin split them", () => {
  for (const path of [
    'runs/r1/messages/..x',
    'runs/r1/messages/x..%2Fy',
    'messages/...',
    'artifacts/report..json',
  ])
    assert.equal(proxyRefuses(upstreamUrl('http://rt:9434/base/', path, '')), true, path)
  for (const path of ['inbox', 'runs/r1/messages/k-1', 'artifacts/report.json', 'messages/a%3Ab'])
    assert.equal(proxyRefuses(upstreamUrl('http://rt:9434/base/', path, '')), false, path)
  assert.equal(proxyRefuses('http://rt/base/%2E/x'), true)
  const url = upstreamUrl('http://[::1]:9434/base/k1/', 'runs/r1/messages/..x', '')
  assert.equal(upstreamOrigin(url), 'http://[::1]:9434/')
  assert.equal(requestTarget(url, ''), '/base/k1/runs/r1/messages/..x')
  assert.equal(requestTarget(url, 'inline=1'), '/base/k1/runs/r1/messages/..x?inline=1')
  assert.equal(requestTarget('http://rt/inbox', ''), '/inbox')
})

test('v1 route table: path builders refuse bad params and rebuild good ones', () => {
  const byUrl = (method: string, url: string) => {
    const r = V1_ROUTES.find((x) => x.method === method && x.url === url)
    assert.ok(r, url)
    return r
  }
  const msg = byUrl('GET', 'messages/:id')
  assert.equal(msg.path({ params: { id: 'm:1' }, url: '' }), 'messages/m%3A1')
  assert.equal(msg.path({ params: { id: '..' }, url: '' }), undefined)
  assert.equal(msg.path({ params: { id: '%2e' }, url: '' }), undefined)
  const run = byUrl('GET', 'runs/:run/messages/:key')
  assert.equal(run.path({ params: { run: 'r1', key: 'k-1' }, url: '' }), 'runs/r1/messages/k-1')
  assert.equal(run.path({ params: { run: 'r1', key: 'a/b' }, url: '' }), 'runs/r1/messages/a%2Fb')
  assert.equal(run.path({ params: { run: 'r1', key: 'a/../b' }, url: '' }), undefined)
  // Only a whole `.` or `..` is a traversal: keys and run ids that start or end with dots are names.
  for (const key of ['..x', '.x', 'x..', '...', '..0a9', 'a/..b', 'x../y'])
    assert.equal(
      run.path({ params: { run: 'r1', key }, url: '' }),
      `runs/r1/messages/${encodeURIComponent(key)}`,
      key,
    )
  for (const key of ['.', '..', './x', 'x/.', '../x', 'a/../b', 'x/..'])
    assert.equal(run.path({ params: { run: 'r1', key }, url: '' }), undefined, key)
  assert.equal(run.path({ params: { run: '..r', key: 'k' }, url: '' }), 'runs/..r/messages/k')
  assert.equal(run.path({ params: { run: '..', key: 'k' }, url: '' }), undefined)
  assert.equal(msg.path({ params: { id: '..m' }, url: '' }), 'messages/..m')
  const art = byUrl('GET', 'artifacts/*')
  assert.equal(
    art.path({ params: {}, url: '/desktop/k1/mcp/artifacts/screenshots/s1.png?x=1' }),
    'artifacts/screenshots/s1.png',
  )
  assert.equal(art.path({ params: {}, url: '/desktop/k1/mcp/artifacts/%2e%2e/x' }), undefined)
  // The router matched an encoded prefix; the raw URL must still be the plain one.
  assert.equal(art.path({ params: {}, url: '/desktop/k1/m%63p/artifacts/report.json' }), undefined)
  for (const r of V1_ROUTES.filter((x) => x.sessionTokenOnly)) {
    assert.equal(r.method, 'POST')
    assert.equal(r.path({ params: { id: 'q1' }, url: '' }), undefined)
  }
  assert.deepEqual(
    V1_ROUTES.filter((x) => x.sessionTokenOnly).map((x) => x.url),
    ['requests', 'requests/:id/cancel'],
  )
})

test('extra read routes: valid names become GET read routes, bad names stop the boot', () => {
  const routes = extraReadRoutes(['report', 'v1/status', 'report'])
  assert.deepEqual(
    routes.map((r) => [r.name, r.method, r.access, r.url, r.path({ params: {}, url: '' })]),
    [
      ['report', 'GET', 'read', 'report', 'report'],
      ['v1/status', 'GET', 'read', 'v1/status', 'v1/status'],
    ],
  )
  for (const bad of ['../x', 'a/../b', '/abs', 'a//b', 'a:b', 'http://x', 'a.b', '', 'a/b/c/d/e', '-x']) {
    assert.equal(isExtraRouteName(bad), false, bad)
    assert.throws(() => extraReadRoutes([bad]), ConfigError, bad)
  }
  for (const shadow of ['messages', 'events', 'artifacts/x', 'requests/open', 'inbox']) {
    assert.throws(() => extraReadRoutes([shadow]), /would shadow/, shadow)
  }
})

test('forwardedQuery keeps only the route parameters, re-encoded, never a token', () => {
  assert.equal(
    forwardedQuery({ since: '3', state: 'pending,queued', token: 't', kasm_runtime_token: 'k', other: 'x' }, [
      'since',
      'state',
    ]),
    'since=3&state=pending%2Cqueued',
  )
  assert.equal(forwardedQuery({ inline: '1&token=x' }, ['inline']), 'inline=1%26token%3Dx')
  assert.equal(forwardedQuery({}, ['since']), '')
  assert.equal(forwardedQuery(undefined, ['since']), '')
  // Even a route that listed it would not forward a credential parameter.
  assert.equal(forwardedQuery({ token: 't' }, ['token']), '')
  assert.equal(
    forwardedQuery({ verbose: '1', Bad: 'x', access_token: 'y', kasm_runtime_token: 'z' }, 'generic'),
    'verbose=1',
  )
})

test('forwardedQuery refuses repeated, oversized or control-character values', () => {
  assert.throws(() => forwardedQuery({ since: ['1', '2'] }, ['since']), { statusCode: 400 })
  assert.throws(() => forwardedQuery({ since: 'x'.repeat(257) }, ['since']), { statusCode: 400 })
  assert.throws(() => forwardedQuery({ state: 'a\r\nb' }, ['state']), { statusCode: 400 })
  const many = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`p${i}`, '1']))
  assert.throws(() => forwardedQuery(many, 'generic'), { statusCode: 400 })
})
