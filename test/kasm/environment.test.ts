import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { refusedEverywhere } from '../../src/kasm/environment.ts'
import { kasmSetup } from './helpers.ts'

/**
 * Issue 24: a launch's `environment` reaches the container of the runtime that holds the messaging token. What
 * configures the runtime or loads code is refused for every launch, in any case and as `<NAME>_FILE`; a team's
 * allowlist (GATEWAY_KASM_TEAMS_FILE) narrows the rest to known names. Each refusal names the variable.
 */

test('no launch sets the runtime’s settings or a loader variable: 400 environment_refused naming it', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t)
  const refused: [string, RegExp][] = [
    ['kasm_runtime_inbox_token', /kasm_runtime_inbox_token configures the session runtime/],
    [
      'Kasm_Runtime_Observe_Token_Required',
      /Kasm_Runtime_Observe_Token_Required configures the session runtime/,
    ],
    ['KASM_RUNTIME_SESSION_TOKEN', /KASM_RUNTIME_SESSION_TOKEN configures/],
    ['KASM_RUNTIME_OBSERVE', /KASM_RUNTIME_OBSERVE configures/],
    ['KASM_RUNTIME_SIDEBAR', /KASM_RUNTIME_SIDEBAR configures/],
    ['KASM_SESSION_RUNTIME_PORT', /KASM_SESSION_RUNTIME_PORT configures/],
    ['KASM_RUNTIME_INBOX_TOKEN_FILE', /KASM_RUNTIME_INBOX_TOKEN_FILE configures/],
    ['LD_PRELOAD', /LD_PRELOAD changes what code the session runs or trusts: no launch may set it/],
    ['LD_LIBRARY_PATH', /LD_LIBRARY_PATH changes what code/],
    ['LD_AUDIT', /LD_AUDIT changes what code/],
    ['ld_preload', /ld_preload changes what code/],
    ['NODE_OPTIONS', /NODE_OPTIONS changes what code/],
    ['NODE_OPTIONS_FILE', /NODE_OPTIONS_FILE changes what code/],
    ['PYTHONPATH', /PYTHONPATH changes what code/],
    ['BASH_ENV', /BASH_ENV changes what code/],
    ['PATH', /PATH changes what code/],
    ['GLIBC_TUNABLES', /GLIBC_TUNABLES changes what code/],
    ['JAVA_TOOL_OPTIONS', /JAVA_TOOL_OPTIONS changes what code/],
    ['NODE_EXTRA_CA_CERTS', /NODE_EXTRA_CA_CERTS changes what code the session runs or trusts/],
  ]
  for (const [name, message] of refused) {
    const res = await call('POST', '/admin/sessions', {
      body: {
        image: 'Chrome',
        team: 'blue',
        environment: { TARGET_URL: 'https://example.test/', [name]: 'x' },
      },
    })
    assert.deepEqual([res.status, res.body.error], [400, 'environment_refused'], `${name}: ${res.text}`)
    assert.match(String(res.body.message), /^environment: /, name)
    assert.match(String(res.body.message), message, name)
    assert.doesNotMatch(String(res.body.message), /TARGET_URL/, `${name}: only the refused one is named`)
  }
  // Several at once: every one named.
  const both = await call('POST', '/admin/sessions', {
    body: { image: 'Chrome', team: 'blue', environment: { LD_PRELOAD: 'x', PYTHONPATH: 'y' } },
  })
  assert.match(String(both.body.message), /LD_PRELOAD .*; PYTHONPATH /)
  assert.deepEqual(kasm.calls, [], 'Kasm was never asked')
  assert.deepEqual(await gw.app.sessions.list(), [])

  // Names that only look alike are a launch's to set.
  const fine = await call('POST', '/admin/sessions', {
    body: {
      image: 'Chrome',
      team: 'blue',
      environment: { TARGET_URL: 'https://example.test/', KASM_URL: 'x', MY_LD_PRELOAD: 'y', PATHS: 'z' },
    },
  })
  assert.equal(fine.status, 201, fine.text)
  const [session] = [...kasm.sessions.values()]
  assert.equal(session?.environment.MY_LD_PRELOAD, 'y')
})

test("a team's environment allowlist: only the names it lists, still never a refused one", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-teams-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'teams.json')
  await writeFile(
    file,
    JSON.stringify({ teams: { blue: { environment: ['TARGET_URL', 'LANG'] }, '*': { environment: [] } } }),
  )
  const { kasm, call } = await kasmSetup(t, { env: { GATEWAY_KASM_TEAMS_FILE: file } })
  const launch = (team: string, environment: Record<string, string>) =>
    call('POST', '/admin/sessions', { body: { image: 'Chrome', team, environment } })

  const listed = await launch('blue', { TARGET_URL: 'https://example.test/', LANG: 'de_DE.UTF-8' })
  assert.equal(listed.status, 201, listed.text)
  const unlisted = await launch('blue', { TARGET_URL: 'https://example.test/', TZ: 'UTC' })
  assert.deepEqual([unlisted.status, unlisted.body.error], [400, 'environment_refused'])
  assert.equal(
    unlisted.body.message,
    "environment: TZ is not one of the variables team blue's launches may set (its environment in GATEWAY_KASM_TEAMS_FILE)",
  )
  const lowerCase = await launch('blue', { target_url: 'x' })
  assert.match(String(lowerCase.body.message), /^environment: target_url is not one of/, 'names are exact')
  // Every other team: the `*` entry, which allows none.
  const red = await launch('red', { TARGET_URL: 'https://example.test/' })
  assert.match(String(red.body.message), /^environment: TARGET_URL is not one of the variables team red's/)
  assert.equal((await launch('red', {})).status, 201)
  assert.equal(kasm.calls.filter((c) => c.call === 'request_kasm').length, 2)
})

test('refusedEverywhere: the runtime prefix in any case, loaders, their _FILE variants; nothing else', () => {
  for (const name of [
    'KASM_RUNTIME',
    'kasm_runtime_x',
    'LD_BIND_NOW',
    'DYLD_INSERT_LIBRARIES',
    'PERL5OPT',
    'RUBYOPT',
  ])
    assert.ok(refusedEverywhere(name), name)
  for (const name of ['KASM_RUNTIMEX', 'XLD_PRELOAD', 'TARGET_URL', 'LANG', 'FILE', '_FILE', 'HOME'])
    assert.equal(refusedEverywhere(name), undefined, name)
})
