import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { ConfigError } from '../../src/config.ts'
import { loadSessionsFile } from '../../src/sessions/file.ts'
import { startGateway } from '../helpers/gateway.ts'

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-sessions-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function write(dir: string, name: string, content: string): Promise<string> {
  const path = join(dir, name)
  await writeFile(path, content)
  return path
}

/** Loads `content` (as JSON when an object) from `name` and expects a ConfigError mentioning every `parts`. */
async function refused(
  t: TestContext,
  content: unknown,
  parts: string[],
  name = 'sessions.json',
  template?: string,
) {
  const dir = await tempDir(t)
  const path = await write(dir, name, typeof content === 'string' ? content : JSON.stringify(content))
  const err = await loadSessionsFile(path, template === undefined ? {} : { template }).then(
    () => assert.fail('expected a ConfigError'),
    (e: unknown) => e,
  )
  assert.ok(err instanceof ConfigError, `not a ConfigError: ${String(err)}`)
  assert.match(err.message, /^GATEWAY_SESSIONS_FILE \(/)
  assert.ok(err.message.includes(path), `message does not name the file: ${err.message}`)
  for (const part of parts) assert.ok(err.message.includes(part), `"${part}" not in: ${err.message}`)
  return err.message
}

const good = { kasmId: 'k1', upstream: 'http://10.0.0.5:9434', messagingToken: 'tok-one', team: 'blue' }

test('loads a JSON file, normalising upstreams to a trailing slash', async (t) => {
  const dir = await tempDir(t)
  const path = await write(
    dir,
    'sessions.json',
    JSON.stringify({
      sessions: [
        good,
        { kasmId: 'k_2-B', upstream: 'https://rt.example/desktop/x/mcp/', messagingToken: 't2', team: 'red' },
      ],
    }),
  )
  const sessions = await loadSessionsFile(path)
  assert.equal(sessions.length, 2)
  assert.deepEqual(
    sessions.map(({ kasmId, upstream, team }) => ({ kasmId, upstream, team })),
    [
      { kasmId: 'k1', upstream: 'http://10.0.0.5:9434/', team: 'blue' },
      { kasmId: 'k_2-B', upstream: 'https://rt.example/desktop/x/mcp/', team: 'red' },
    ],
  )
  assert.equal(sessions[0]?.messagingToken.reveal(), 'tok-one')
  assert.ok(!JSON.stringify(sessions).includes('tok-one'), 'a token serialises')
})

test('loads YAML by extension, and JSON or YAML by content under another extension', async (t) => {
  const dir = await tempDir(t)
  const yaml = `sessions:\n  - kasmId: k1\n    upstream: http://10.0.0.5:9434/a\n    messagingToken: tok-yaml\n    team: blue\n`
  for (const name of ['s.yaml', 's.yml', 's.conf']) {
    const sessions = await loadSessionsFile(await write(dir, name, yaml))
    assert.equal(sessions[0]?.upstream, 'http://10.0.0.5:9434/a/', name)
    assert.equal(sessions[0]?.messagingToken.reveal(), 'tok-yaml', name)
  }
  const json = await loadSessionsFile(
    await write(dir, 'sessions', `  ${JSON.stringify({ sessions: [good] })}`),
  )
  assert.equal(json[0]?.kasmId, 'k1')
  const empty = await loadSessionsFile(await write(dir, 'none.yaml', 'sessions: []\n'))
  assert.deepEqual(empty, [])
})

test('reads messagingTokenFile relative to the sessions file, trimmed', async (t) => {
  const dir = await tempDir(t)
  await write(dir, 'k1-token', '  tok-from-secret\n')
  const absolute = await write(dir, 'k2-token', 'tok-absolute\n')
  const path = await write(
    dir,
    'sessions.yaml',
    `sessions:\n  - {kasmId: k1, upstream: "http://a/", messagingTokenFile: k1-token, team: blue}\n` +
      `  - {kasmId: k2, upstream: "http://b/", messagingTokenFile: "${absolute}", team: blue}\n`,
  )
  const sessions = await loadSessionsFile(path)
  assert.deepEqual(
    sessions.map((s) => s.messagingToken.reveal()),
    ['tok-from-secret', 'tok-absolute'],
  )
})

test('builds the upstream of an entry without one from the template', async (t) => {
  const dir = await tempDir(t)
  const path = await write(
    dir,
    's.json',
    JSON.stringify({ sessions: [{ kasmId: 'k7', messagingToken: 't', team: 'blue' }, good] }),
  )
  const sessions = await loadSessionsFile(path, {
    template: 'http://kasm-proxy.internal/desktop/{kasmId}/mcp',
  })
  assert.equal(sessions[0]?.upstream, 'http://kasm-proxy.internal/desktop/k7/mcp/')
  assert.equal(sessions[1]?.upstream, 'http://10.0.0.5:9434/', 'an explicit upstream wins over the template')
})

test('refuses each invalid entry, naming the entry and the problem', async (t) => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['bad kasmId', { ...good, kasmId: 'k/1' }, 'sessions[0]: kasmId: must be 1-128 letters'],
    ['kasmId too long', { ...good, kasmId: 'k'.repeat(129) }, 'kasmId: must be'],
    ['missing kasmId', { ...good, kasmId: undefined }, 'kasmId: is required'],
    ['non-http upstream', { ...good, upstream: 'ftp://h/' }, 'upstream: must be an absolute http(s) URL'],
    [
      'relative upstream',
      { ...good, upstream: '/desktop/k1/mcp/' },
      'upstream: must be an absolute http(s) URL',
    ],
    [
      'upstream with credentials',
      { ...good, upstream: 'http://u:p@h/' },
      'upstream: must not contain credentials',
    ],
    ['upstream with a query', { ...good, upstream: 'http://h/?token=x' }, 'upstream: must not have a query'],
    ['upstream with an empty query', { ...good, upstream: 'http://h/?' }, 'upstream: must not have a query'],
    ['upstream with a fragment', { ...good, upstream: 'http://h/#x' }, 'upstream: must not have a fragment'],
    [
      'both tokens',
      { ...good, messagingTokenFile: 'x' },
      'exactly one of messagingToken or messagingTokenFile',
    ],
    [
      'no token',
      { ...good, messagingToken: undefined },
      'exactly one of messagingToken or messagingTokenFile',
    ],
    ['empty token', { ...good, messagingToken: '' }, 'messagingToken: must not be empty'],
    ['token with a space', { ...good, messagingToken: 'a b' }, 'messagingToken: must be printable ASCII'],
    ['token not a string', { ...good, messagingToken: 42 }, 'messagingToken: must be a string'],
    ['empty team', { ...good, team: '  ' }, 'team: must be a non-empty string'],
    ['missing team', { ...good, team: undefined }, 'team: is required'],
    ['unknown field', { ...good, tenant: 'x' }, "Unrecognized key(s) in object: 'tenant'"],
  ]
  for (const [name, entry, expected] of cases) {
    await t.test(name, async (t) => {
      const message = await refused(t, { sessions: [entry] }, [expected])
      assert.ok(!message.includes('tok-one'), 'the message quotes a token')
    })
  }
})

test('names the bad entry by index and kasmId, and reports every bad entry', async (t) => {
  const message = await refused(
    t,
    { sessions: [good, { ...good, kasmId: 'k2', upstream: 'nope' }, { ...good, kasmId: 'k3', team: '' }] },
    ['sessions[1] (kasmId "k2"): upstream:', 'sessions[2] (kasmId "k3"): team:'],
  )
  assert.ok(!message.includes('sessions[0]'), message)
})

test('refuses duplicate kasmIds', async (t) => {
  await refused(t, { sessions: [good, { ...good, team: 'red' }] }, [
    'sessions[1] (kasmId "k1"): duplicate kasmId, already used by sessions[0]',
  ])
})

test('refuses an entry without upstream when no template is set', async (t) => {
  await refused(t, { sessions: [{ kasmId: 'k1', messagingToken: 't', team: 'blue' }] }, [
    'sessions[0] (kasmId "k1"): upstream: is required (GATEWAY_UPSTREAM_TEMPLATE is not set)',
  ])
})

test('refuses an unreadable, empty or invalid token file', async (t) => {
  const dir = await tempDir(t)
  await write(dir, 'empty', '\n  \n')
  await write(dir, 'spaced', 'two words\n')
  const cases: Array<[string, string]> = [
    ['missing', 'messagingTokenFile: cannot read'],
    ['empty', 'must not be empty'],
    ['spaced', 'must be printable ASCII'],
  ]
  for (const [file, expected] of cases) {
    const path = await write(
      dir,
      `s-${file}.json`,
      JSON.stringify({
        sessions: [{ kasmId: 'k1', upstream: 'http://h/', team: 'b', messagingTokenFile: file }],
      }),
    )
    const err = await loadSessionsFile(path).catch((e: unknown) => e)
    assert.ok(err instanceof ConfigError)
    assert.ok(err.message.includes('sessions[0] (kasmId "k1")'), err.message)
    assert.ok(err.message.includes(expected), `${expected} not in ${err.message}`)
    assert.ok(!err.message.includes('two words'), 'the message quotes the token file content')
  }
})

test('refuses a file that is not a sessions document, without quoting its content', async (t) => {
  await refused(t, '{"sessions": [{"kasmId": "k1", "messagingToken": "s3cret-tok', ['invalid JSON at line 1'])
  const broken = await refused(
    t,
    'sessions:\n  - kasmId: k1\n    messagingToken: s3cret-tok\n    messagingToken: s3cret-tok\n',
    ['invalid YAML (DUPLICATE_KEY) at line 4'],
    'sessions.yaml',
  )
  assert.ok(!broken.includes('s3cret'), broken)
  await refused(t, '[]', ['must be an object with a "sessions" list'])
  await refused(t, '', ['must be an object with a "sessions" list'], 'empty.yaml')
  await refused(t, { sessions: {} }, ['sessions: must be a list'])
  await refused(t, {}, ['sessions: is required'])
  await refused(t, { sessions: [], extra: 1 }, ["Unrecognized key(s) in object: 'extra'"])
  await refused(t, { sessions: ['k1'] }, ['sessions[0]: Expected object, received string'])
})

test('refuses a missing file', async (t) => {
  const dir = await tempDir(t)
  const err = await loadSessionsFile(join(dir, 'absent.json')).catch((e: unknown) => e)
  assert.ok(err instanceof ConfigError)
  assert.match(err.message, /absent\.json\): cannot read the file \(ENOENT\)/)
})

test('a bad sessions file stops the boot with a ConfigError naming the variable, file and entry', async (t) => {
  const dir = await tempDir(t)
  const path = await write(
    dir,
    'sessions.json',
    JSON.stringify({ sessions: [{ ...good, upstream: 'http://h/?q' }] }),
  )
  const err = await startGateway({ GATEWAY_SESSIONS_FILE: path }).catch((e: unknown) => e)
  assert.ok(err instanceof ConfigError, `not a ConfigError: ${String(err)}`)
  assert.ok(err.message.includes(`GATEWAY_SESSIONS_FILE (${path})`), err.message)
  assert.ok(err.message.includes('sessions[0] (kasmId "k1"): upstream: must not have a query'), err.message)

  const noTemplate = await write(
    dir,
    'bare.json',
    JSON.stringify({ sessions: [{ ...good, upstream: undefined }] }),
  )
  const bare = await startGateway({ GATEWAY_SESSIONS_FILE: noTemplate }).catch((e: unknown) => e)
  assert.ok(bare instanceof ConfigError)
  assert.ok(bare.message.includes('upstream: is required'), bare.message)
})

test('a template that cannot give a valid upstream stops the boot', async () => {
  const err = await startGateway({ GATEWAY_UPSTREAM_TEMPLATE: 'http://proxy/{kasmId}/?x=1' }).catch(
    (e: unknown) => e,
  )
  assert.ok(err instanceof ConfigError, String(err))
  assert.match(err.message, /GATEWAY_UPSTREAM_TEMPLATE: must not have a query/)
})

test('a good file boots: sessions are registered, template applied, readiness ok', async (t) => {
  const dir = await tempDir(t)
  const path = await write(
    dir,
    'sessions.yaml',
    'sessions:\n  - {kasmId: k1, upstream: "http://10.0.0.5:9434", messagingToken: tok-1, team: blue}\n' +
      '  - {kasmId: k2, messagingToken: tok-2, team: red}\n',
  )
  const gw = await startGateway({
    GATEWAY_SESSIONS_FILE: path,
    GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-proxy.internal/desktop/{kasmId}/mcp/',
  })
  t.after(() => gw.close())
  assert.deepEqual(await gw.app.sessions.list(), [
    { kasmId: 'k1', upstream: 'http://10.0.0.5:9434/', team: 'blue', source: 'file', version: 1 },
    {
      kasmId: 'k2',
      upstream: 'http://kasm-proxy.internal/desktop/k2/mcp/',
      team: 'red',
      source: 'file',
      version: 1,
    },
  ])
  assert.equal((await gw.app.sessions.get('k2'))?.messagingToken.reveal(), 'tok-2')
  const ready = await fetch(`${gw.url}/readyz`)
  const body = (await ready.json()) as { checks: Record<string, string> }
  assert.equal(body.checks.sessions, 'ok')
})
