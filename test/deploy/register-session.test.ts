import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { startFakeKasm } from '../fixtures/kasm-api.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { TEST_AUDIENCE, TEST_ISSUER, TEST_JWT_SECRET } from '../helpers/jwt.ts'
import { WAIT_MS } from '../helpers/wait.ts'
import { API_KEY, API_SECRET, kasmSetup } from '../kasm/helpers.ts'
import { root } from './helm.ts'

const script = join(root, 'deploy/kasm/register-session.mjs')

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Runs the orchestrator's script as a platform would: a separate node process, configured by environment. */
function register(env: Record<string, string>, args: string[] = []): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [script, ...args],
      { env: { PATH: process.env.PATH ?? '', REGISTER_ATTEMPTS: '2', ...env }, timeout: WAIT_MS },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0
        resolve({ code, stdout, stderr })
      },
    )
  })
}

function base(gateway: TestGateway): Record<string, string> {
  return {
    GATEWAY_URL: gateway.url,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    GATEWAY_JWT_ISSUER: TEST_ISSUER,
    GATEWAY_JWT_AUDIENCE: TEST_AUDIENCE,
  }
}

describe('deploy/kasm/register-session.mjs against a real gateway', () => {
  test('registers, rotates the token, unregisters; never prints the token', async (t) => {
    const gateway = await startGateway()
    t.after(() => gateway.close())
    const token = 'messaging-token-0123456789-first'
    const session = {
      ...base(gateway),
      KASM_ID: 'kasm-deploy-1',
      SESSION_TEAM: 'qa',
      SESSION_UPSTREAM: 'http://10.20.0.15:9434',
      MESSAGING_TOKEN: token,
    }

    const first = await register(session)
    assert.equal(first.code, 0, first.stderr)
    assert.ok(!first.stdout.includes(token) && !first.stderr.includes(token))
    const view = JSON.parse(first.stdout) as { kasmId: string; team: string; upstream: string }
    assert.deepEqual(
      [view.kasmId, view.team, view.upstream],
      ['kasm-deploy-1', 'qa', 'http://10.20.0.15:9434/'],
    )
    assert.equal((await gateway.app.sessions.get('kasm-deploy-1'))?.messagingToken.reveal(), token)

    // Token rotation from a file (how a mounted Kubernetes secret would hand it over).
    const dir = await mkdtemp(join(tmpdir(), 'krg-register-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    await writeFile(join(dir, 'token'), 'messaging-token-0123456789-second\n')
    const { MESSAGING_TOKEN: _, ...withoutToken } = session
    const second = await register({ ...withoutToken, MESSAGING_TOKEN_FILE: join(dir, 'token') })
    assert.equal(second.code, 0, second.stderr)
    assert.equal(
      (await gateway.app.sessions.get('kasm-deploy-1'))?.messagingToken.reveal(),
      'messaging-token-0123456789-second',
    )

    const removed = await register({ ...base(gateway), KASM_ID: 'kasm-deploy-1' }, ['--remove'])
    assert.equal(removed.code, 0, removed.stderr)
    assert.deepEqual(JSON.parse(removed.stdout), { kasmId: 'kasm-deploy-1', removed: true })
    assert.equal(await gateway.app.sessions.get('kasm-deploy-1'), undefined)
  })

  test('refusals: missing input, a wrong credential, a bad upstream, an unreachable gateway', async (t) => {
    const gateway = await startGateway()
    t.after(() => gateway.close())
    const token = 'messaging-token-0123456789-refused'
    const ok = { ...base(gateway), KASM_ID: 'kasm-deploy-2', SESSION_TEAM: 'qa', MESSAGING_TOKEN: token }

    const noTeam = await register({ ...ok, SESSION_TEAM: '' })
    assert.equal(noTeam.code, 2)
    assert.match(noTeam.stderr, /SESSION_TEAM is required/)

    const wrongKey = await register({
      ...ok,
      SESSION_UPSTREAM: 'http://r:9434/',
      GATEWAY_JWT_SECRET: 'x'.repeat(40),
    })
    assert.equal(wrongKey.code, 2)
    assert.match(wrongKey.stderr, /register failed: 401/)

    const badUpstream = await register({ ...ok, SESSION_UPSTREAM: 'http://r:9434/?token=x' })
    assert.equal(badUpstream.code, 2)
    assert.match(badUpstream.stderr, /register failed: 400 .*upstream/)
    assert.ok(!badUpstream.stderr.includes(token))
    assert.equal(await gateway.app.sessions.get('kasm-deploy-2'), undefined)

    const unreachable = await register({
      ...ok,
      SESSION_UPSTREAM: 'http://r:9434/',
      GATEWAY_URL: 'http://127.0.0.1:1',
    })
    assert.equal(unreachable.code, 2)
    assert.match(unreachable.stderr, /gateway unreachable at http:\/\/127\.0\.0\.1:1/)
  })
})

describe('deploy/kasm/register-session.mjs with Kasm', () => {
  test('launches through the gateway when it has Kasm API access; the token never passes through the script', async (t) => {
    const { kasm, gw } = await kasmSetup(t, {
      env: {
        GATEWAY_KASM_UPSTREAM: 'template',
        GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-{kasmId}.sessions.internal:9434/',
        // The script's KASM_USER_ID is a user_id the team may choose: here the gateway's own user.
        GATEWAY_KASM_USER_ID: 'u-42',
      },
    })
    const run = await register({
      ...base(gw),
      SESSION_TEAM: 'qa',
      KASM_IMAGE: 'Chrome',
      KASM_USER_ID: 'u-42',
      SESSION_ENVIRONMENT: '{"TARGET_URL": "https://example.test/"}',
    })
    assert.equal(run.code, 0, run.stderr)
    const view = JSON.parse(run.stdout) as { kasmId: string; source: string; team: string; viewerUrl: string }
    const [session] = [...kasm.sessions.values()]
    assert.ok(session)
    assert.deepEqual([view.kasmId, view.source, view.team], [session.dashed, 'launch', 'qa'])
    assert.match(view.viewerUrl, /#\/connect\/kasm\//)
    assert.equal(session.userId, 'u-42')
    assert.equal(session.environment.TARGET_URL, 'https://example.test/')
    const token = session.environment.KASM_RUNTIME_INBOX_TOKEN ?? ''
    assert.equal((await gw.app.sessions.get(session.dashed))?.messagingToken.reveal(), token)
    assert.ok(!run.stdout.includes(token) && !run.stderr.includes(token))
  })

  test('asks Kasm itself (either authentication form) when only the script has API access', async (t) => {
    for (const auth of ['body', 'basic'] as const) {
      const kasm = await startFakeKasm({ auth })
      t.after(() => kasm.close())
      const gateway = await startGateway()
      t.after(() => gateway.close())
      const run = await register({
        ...base(gateway),
        SESSION_TEAM: 'qa',
        SESSION_UPSTREAM: 'http://10.20.0.15:9434/',
        KASM_API_URL: new URL(kasm.url).origin,
        KASM_API_KEY: API_KEY,
        KASM_API_KEY_SECRET: API_SECRET,
        KASM_API_AUTH: auth,
        KASM_IMAGE_ID: kasm.images[0]?.image_id ?? '',
      })
      assert.equal(run.code, 0, run.stderr)
      const [session] = [...kasm.sessions.values()]
      assert.ok(session)
      const view = JSON.parse(run.stdout) as { kasmId: string; source: string }
      assert.deepEqual([view.kasmId, view.source], [session.dashed, 'kasm'], 'registered to follow Kasm')
      const token = session.environment.KASM_RUNTIME_INBOX_TOKEN ?? ''
      assert.match(token, /^[A-Za-z0-9_-]{43}$/)
      assert.equal((await gateway.app.sessions.get(session.dashed))?.messagingToken.reveal(), token)
      assert.deepEqual(
        kasm.calls.map((c) => c.auth),
        [auth],
      )
    }
  })

  test('a launch against a gateway without Kasm API access says what to set instead', async (t) => {
    const gateway = await startGateway()
    t.after(() => gateway.close())
    const run = await register({ ...base(gateway), SESSION_TEAM: 'qa', KASM_IMAGE: 'Chrome' })
    assert.equal(run.code, 2)
    assert.match(
      run.stderr,
      /the gateway has no Kasm API configured; set KASM_ID \(register\) or KASM_API_URL/,
    )
  })
})
