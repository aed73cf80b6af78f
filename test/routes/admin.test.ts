import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { withoutRequestId } from '../helpers/error-body.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

interface Answer {
  status: number
  headers: Headers
  text: string
  body: Record<string, unknown> | null
}

/** A gateway with the admin API, its logs captured, and a sessions file holding `file-1` (team blue). */
async function start(t: TestContext, env: Record<string, string> = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'krg-admin-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'sessions.json')
  await writeFile(
    file,
    JSON.stringify({
      sessions: [
        { kasmId: 'file-1', upstream: 'http://f:9434/', messagingToken: 'tok-file-secret', team: 'blue' },
      ],
    }),
  )
  const logs = captureLogs()
  const gw = await startGateway({ GATEWAY_SESSIONS_FILE: file, ...env }, { logger: logs.logger })
  t.after(() => gw.close())
  const answers: string[] = []
  const call = async (
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; raw?: string; type?: string } = {},
  ) => {
    const headers: Record<string, string> = {}
    if (opts.token) headers.authorization = `Bearer ${opts.token}`
    let payload: string | undefined
    if (opts.body !== undefined || opts.raw !== undefined) {
      headers['content-type'] = opts.type ?? 'application/json'
      payload = opts.raw ?? JSON.stringify(opts.body)
    }
    const response = await fetch(`${gw.url}${path}`, {
      method,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
    })
    const text = await response.text()
    answers.push(text)
    const answer: Answer = {
      status: response.status,
      headers: response.headers,
      text,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : null,
    }
    return answer
  }
  const admin = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  return { gw, logs, call, admin, answers }
}

test('admin CRUD: create, read, rotate, list, delete; tokens are write-only', async (t) => {
  const { gw, logs, call, admin, answers } = await start(t)

  const created = await call('PUT', '/admin/sessions/k1', {
    token: admin,
    body: { upstream: 'http://10.0.0.5:9434', team: 'blue', messagingToken: 'tok-first-secret' },
  })
  assert.equal(created.status, 201)
  assert.deepEqual(created.body, {
    kasmId: 'k1',
    upstream: 'http://10.0.0.5:9434/',
    team: 'blue',
    source: 'admin',
    version: 1,
  })
  assert.equal(created.headers.get('cache-control'), 'no-store')
  assert.equal((await gw.app.sessions.get('k1'))?.messagingToken.reveal(), 'tok-first-secret')

  const read = await call('GET', '/admin/sessions/k1', { token: admin })
  assert.equal(read.status, 200)
  assert.deepEqual(read.body, created.body)

  const rotated = await call('PUT', '/admin/sessions/k1', {
    token: admin,
    body: { upstream: 'http://10.0.0.5:9434/', team: 'blue', messagingToken: 'tok-rotated-secret' },
  })
  assert.equal(rotated.status, 200)
  assert.equal(rotated.body?.version, 2)
  assert.equal((await gw.app.sessions.get('k1'))?.messagingToken.reveal(), 'tok-rotated-secret')
  const retitled = await call('PUT', '/admin/sessions/k1', {
    token: admin,
    body: { upstream: 'http://10.0.0.5:9434/', team: 'red', messagingToken: 'tok-rotated-secret' },
  })
  assert.equal(retitled.status, 200)
  assert.equal(retitled.body?.version, 2, 'a team change alone keeps the version')

  const list = await call('GET', '/admin/sessions', { token: admin })
  assert.equal(list.status, 200)
  assert.deepEqual(list.body, {
    sessions: [
      { kasmId: 'file-1', upstream: 'http://f:9434/', team: 'blue', source: 'file', version: 1 },
      { kasmId: 'k1', upstream: 'http://10.0.0.5:9434/', team: 'red', source: 'admin', version: 2 },
    ],
  })

  const deleted = await call('DELETE', '/admin/sessions/k1', { token: admin })
  assert.equal(deleted.status, 204)
  assert.equal(deleted.text, '')
  assert.equal(await gw.app.sessions.get('k1'), undefined)
  const gone = await call('GET', '/admin/sessions/k1', { token: admin })
  assert.equal(gone.status, 404)
  const { requestId: goneId, ...goneBody } = gone.body as { requestId?: string }
  assert.deepEqual(goneBody, { error: 'session_not_found', message: 'no such session' })
  const again = await call('DELETE', '/admin/sessions/k1', { token: admin })
  assert.equal(again.status, 404)
  const { requestId: againId, ...againBody } = again.body as { requestId?: string }
  assert.deepEqual(againBody, goneBody)
  assert.notEqual(againId, goneId, 'each request has its own id')

  for (const secret of ['tok-first-secret', 'tok-rotated-secret', 'tok-file-secret']) {
    for (const answer of answers) assert.ok(!answer.includes(secret), `${secret} in a response: ${answer}`)
    assert.ok(!logs.text().includes(secret), `${secret} in the logs`)
  }
  assert.ok(logs.text().includes('"audit"'), 'the log capture works (audit lines present)')
})

test('the template gives the upstream of a session registered without one; without it, 400', async (t) => {
  const withTemplate = await start(t, {
    GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-proxy.internal/desktop/{kasmId}/mcp/',
  })
  const res = await withTemplate.call('PUT', '/admin/sessions/abc', {
    token: withTemplate.admin,
    body: { team: 'blue', messagingToken: 'tok-t' },
  })
  assert.equal(res.status, 201)
  assert.equal(res.body?.upstream, 'http://kasm-proxy.internal/desktop/abc/mcp/')

  const bare = await start(t)
  const refused = await bare.call('PUT', '/admin/sessions/abc', {
    token: bare.admin,
    body: { team: 'blue', messagingToken: 'tok-t' },
  })
  assert.equal(refused.status, 400)
  assert.deepEqual(refused.body, {
    error: 'bad_request',
    message: 'upstream: is required (GATEWAY_UPSTREAM_TEMPLATE is not set)',
    requestId: refused.headers.get('x-request-id'),
  })
  assert.equal(await bare.gw.app.sessions.get('abc'), undefined)
})

test('every invalid PUT is refused with 400 bad_request and a clear message, nothing registered', async (t) => {
  const { gw, call, admin, answers } = await start(t)
  const good = { upstream: 'http://h:9434/', team: 'blue', messagingToken: 'tok-valid-secret' }
  const cases: Array<[string, string, { body?: unknown; raw?: string; type?: string }, RegExp]> = [
    ['bad kasmId', '/admin/sessions/bad.id', { body: good }, /^kasmId: must be 1-128 letters/],
    ['no body', '/admin/sessions/k1', {}, /body must be a JSON object/],
    ['array body', '/admin/sessions/k1', { body: [good] }, /body must be a JSON object/],
    [
      'string body',
      '/admin/sessions/k1',
      { raw: 'tok-valid-secret', type: 'text/plain' },
      /body must be a JSON object/,
    ],
    [
      'unknown field',
      '/admin/sessions/k1',
      { body: { ...good, source: 'file' } },
      /Unrecognized key\(s\) in object: 'source'/,
    ],
    [
      'kasmId in the body',
      '/admin/sessions/k1',
      { body: { ...good, kasmId: 'k2' } },
      /Unrecognized key\(s\) in object: 'kasmId'/,
    ],
    ['missing team', '/admin/sessions/k1', { body: { ...good, team: undefined } }, /^team: is required/],
    [
      'empty team',
      '/admin/sessions/k1',
      { body: { ...good, team: '' } },
      /^team: must be a non-empty string/,
    ],
    [
      'missing token',
      '/admin/sessions/k1',
      { body: { ...good, messagingToken: undefined } },
      /^messagingToken: is required/,
    ],
    [
      'token with CRLF',
      '/admin/sessions/k1',
      { body: { ...good, messagingToken: 'tok-valid-secret\r\nx: y' } },
      /^messagingToken: must be printable ASCII/,
    ],
    [
      'token not a string',
      '/admin/sessions/k1',
      { body: { ...good, messagingToken: 7 } },
      /^messagingToken: must be a string/,
    ],
    [
      'non-http upstream',
      '/admin/sessions/k1',
      { body: { ...good, upstream: 'javascript:alert(1)' } },
      /^upstream: must be an absolute http\(s\) URL/,
    ],
    [
      'upstream with credentials',
      '/admin/sessions/k1',
      { body: { ...good, upstream: 'http://a:b@h/' } },
      /^upstream: must not contain credentials/,
    ],
    [
      'upstream with a query',
      '/admin/sessions/k1',
      { body: { ...good, upstream: 'http://h/?x=1' } },
      /^upstream: must not have a query/,
    ],
    [
      'upstream with a fragment',
      '/admin/sessions/k1',
      { body: { ...good, upstream: 'http://h/#f' } },
      /^upstream: must not have a fragment/,
    ],
    ['broken JSON', '/admin/sessions/k1', { raw: '{"team": "blue", "messagingToken": ' }, /./],
  ]
  for (const [name, path, opts, message] of cases) {
    const res = await call('PUT', path, { token: admin, ...opts })
    assert.equal(res.status, 400, `${name}: ${res.text}`)
    assert.equal(res.body?.error, 'bad_request', name)
    assert.match(String(res.body?.message), message, name)
  }
  assert.deepEqual(
    (await gw.app.sessions.list()).map((s) => s.kasmId),
    ['file-1'],
  )
  for (const answer of answers) assert.ok(!answer.includes('tok-valid-secret'), `token echoed: ${answer}`)
})

test('sessions from the file are visible but changed only in the file (409)', async (t) => {
  const { gw, call, admin } = await start(t)
  const read = await call('GET', '/admin/sessions/file-1', { token: admin })
  assert.equal(read.body?.source, 'file')
  const put = await call('PUT', '/admin/sessions/file-1', {
    token: admin,
    body: { upstream: 'http://evil/', team: 'blue', messagingToken: 'tok-other' },
  })
  assert.equal(put.status, 409)
  assert.equal(put.body?.error, 'session_conflict')
  assert.match(String(put.body?.message), /GATEWAY_SESSIONS_FILE/)
  const del = await call('DELETE', '/admin/sessions/file-1', { token: admin })
  assert.equal(del.status, 409)
  assert.equal(del.body?.error, 'session_conflict')
  assert.equal((await gw.app.sessions.get('file-1'))?.upstream, 'http://f:9434/')
})

test('without the admin role: 401 unauthenticated, 403 for viewers and operators', async (t) => {
  const { gw, call } = await start(t)
  const body = { upstream: 'http://h/', team: 'blue', messagingToken: 'tok-x' }
  const routes: Array<[string, string]> = [
    ['GET', '/admin/sessions'],
    ['GET', '/admin/sessions/file-1'],
    ['PUT', '/admin/sessions/k1'],
    ['DELETE', '/admin/sessions/file-1'],
    ['GET', '/admin/audit'],
  ]
  const operator = await bearer({ sub: 'olga', roles: ['operator'], teams: ['*'] })
  const viewer = await bearer({ sub: 'vera', roles: ['viewer'], teams: ['*'] })
  for (const [method, path] of routes) {
    const withBody = method === 'PUT' ? { body } : {}
    const anonymous = await call(method, path, withBody)
    assert.equal(anonymous.status, 401, `${method} ${path}`)
    assert.equal(anonymous.body?.error, 'unauthenticated')
    for (const token of [operator, viewer]) {
      const res = await call(method, path, { token, ...withBody })
      assert.equal(res.status, 403, `${method} ${path}`)
      assert.equal(res.body?.error, 'forbidden')
    }
  }
  assert.equal(await gw.app.sessions.get('k1'), undefined)
  assert.ok(await gw.app.sessions.get('file-1'))
})

test('an admin of some teams sees and changes only their sessions; a foreign one looks unknown', async (t) => {
  const { gw, call } = await start(t)
  await gw.app.sessions.put({
    kasmId: 'red-1',
    upstream: 'http://r/',
    team: 'red',
    messagingToken: 'tok-r',
    source: 'admin',
  })
  const blueAdmin = await bearer({ sub: 'bea', roles: ['admin'], teams: ['blue'] })

  const list = await call('GET', '/admin/sessions', { token: blueAdmin })
  assert.deepEqual(
    ((list.body?.sessions ?? []) as Array<{ kasmId: string }>).map((s) => s.kasmId),
    ['file-1'],
  )
  const foreign = await call('GET', '/admin/sessions/red-1', { token: blueAdmin })
  const unknown = await call('GET', '/admin/sessions/nope', { token: blueAdmin })
  assert.equal(foreign.status, 404)
  assert.equal(
    withoutRequestId(foreign.text),
    withoutRequestId(unknown.text),
    'a foreign session answers exactly like an unknown one',
  )
  const foreignDelete = await call('DELETE', '/admin/sessions/red-1', { token: blueAdmin })
  assert.equal(foreignDelete.status, 404)
  assert.equal(withoutRequestId(foreignDelete.text), withoutRequestId(unknown.text))

  const body = { upstream: 'http://h/', messagingToken: 'tok-y' }
  const otherTeam = await call('PUT', '/admin/sessions/new-1', {
    token: blueAdmin,
    body: { ...body, team: 'red' },
  })
  assert.equal(otherTeam.status, 403)
  assert.equal(otherTeam.body?.error, 'forbidden')
  // Taking over another team's session: refused exactly as GET and DELETE answer an unknown id, never a 403
  // that says the id exists in some other team.
  const takeOver = await call('PUT', '/admin/sessions/red-1', {
    token: blueAdmin,
    body: { ...body, team: 'blue' },
  })
  assert.equal(takeOver.status, 404, takeOver.text)
  assert.equal(withoutRequestId(takeOver.text), withoutRequestId(unknown.text))
  assert.equal((await gw.app.sessions.get('red-1'))?.team, 'red')
  // The refusal is the caller's: audited under their team, never under the team of the session they named.
  const refusals = (await gw.app.audit.recent({ limit: 10, kasmId: 'red-1' })).filter(
    (r) => r.method === 'PUT',
  )
  assert.deepEqual(
    refusals.map((r) => [r.status, r.error, r.team]),
    [[404, 'session_not_found', 'blue']],
  )
  assert.equal(await gw.app.sessions.get('new-1'), undefined)
  const own = await call('PUT', '/admin/sessions/new-1', {
    token: blueAdmin,
    body: { ...body, team: 'blue' },
  })
  assert.equal(own.status, 201)
})

test('admin writes and their refusals are audited; GET /admin/audit filters, newest first', async (t) => {
  const { gw, call, admin } = await start(t)
  const body = { upstream: 'http://h/', team: 'blue', messagingToken: 'tok-audited-secret' }
  await call('PUT', '/admin/sessions/k1', { token: admin, body })
  await call('PUT', '/admin/sessions/k1', {
    token: admin,
    body: { ...body, messagingToken: 'tok-audited-2' },
  })
  await call('PUT', '/admin/sessions/k2', { token: admin, body })
  await call('DELETE', '/admin/sessions/k1', { token: admin })
  const operator = await bearer({ sub: 'olga', roles: ['operator'] })
  await call('DELETE', '/admin/sessions/k2', { token: operator })
  await call('PUT', '/admin/sessions/k3', { token: admin, body: { ...body, team: '' } })
  await call('GET', '/admin/sessions', { token: admin })

  const res = await call('GET', '/admin/audit', { token: admin })
  assert.equal(res.status, 200)
  const records = res.body?.records as AuditRecord[]
  assert.deepEqual(
    records.map((r) => [r.method, r.kasmId, r.route, r.action, r.sub, r.outcome, r.status, r.error]),
    [
      ['PUT', 'k3', 'admin/sessions', undefined, 'root', 'refused', 400, 'bad_request'],
      ['DELETE', 'k2', 'admin/sessions', undefined, 'olga', 'refused', 403, 'forbidden'],
      ['DELETE', 'k1', 'admin/sessions', 'delete', 'root', 'forwarded', 204, undefined],
      ['PUT', 'k2', 'admin/sessions', 'create', 'root', 'forwarded', 201, undefined],
      ['PUT', 'k1', 'admin/sessions', 'replace', 'root', 'forwarded', 200, undefined],
      ['PUT', 'k1', 'admin/sessions', 'create', 'root', 'forwarded', 201, undefined],
    ],
  )
  assert.ok(!res.text.includes('tok-audited'), 'a token in the audit')

  const limited = await call('GET', '/admin/audit?limit=2', { token: admin })
  assert.deepEqual(
    ((limited.body?.records ?? []) as AuditRecord[]).map((r) => r.kasmId),
    ['k3', 'k2'],
  )
  const byKasm = await call('GET', '/admin/audit?kasmId=k1', { token: admin })
  assert.deepEqual(
    ((byKasm.body?.records ?? []) as AuditRecord[]).map((r) => [r.method, r.action]),
    [
      ['DELETE', 'delete'],
      ['PUT', 'replace'],
      ['PUT', 'create'],
    ],
  )
  const bySub = await call('GET', '/admin/audit?sub=olga&limit=5', { token: admin })
  assert.deepEqual(
    ((bySub.body?.records ?? []) as AuditRecord[]).map((r) => r.status),
    [403],
  )
  assert.equal((await gw.app.audit.recent({ limit: 100 })).length, 6, 'GET requests are not audited')

  const bad: Array<[string, RegExp]> = [
    ['/admin/audit?limit=0', /^limit:/],
    ['/admin/audit?limit=1001', /^limit:/],
    ['/admin/audit?limit=ten', /^limit:/],
    ['/admin/audit?kasmId=a/b', /^kasmId: must be/],
    ['/admin/audit?sub=', /^sub:/],
    ['/admin/audit?since=1', /Unrecognized key\(s\) in object: 'since'/],
  ]
  for (const [path, message] of bad) {
    const refused = await call('GET', path, { token: admin })
    assert.equal(refused.status, 400, path)
    assert.equal(refused.body?.error, 'bad_request')
    assert.match(String(refused.body?.message), message, path)
  }
})
