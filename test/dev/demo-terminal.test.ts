import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { loggerOptions } from '../../src/logger.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { sharedChromium } from '../helpers/chromium.ts'
import { testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { captureLogs } from '../sessions/capture-logs.ts'
import { signInWithChromium } from '../signin/harness.ts'

const chromium = sharedChromium()

/**
 * `npm start` as a newcomer meets it (nothing configured, the default log level): the terminal says how to
 * sign in and stays readable, and the console signs in at whichever local address the person opens.
 */
test('the demo: both local addresses sign in; its terminal shows the banner and readable lines only (no JSON, no warning, no request line), and the sign-in again at the first login', async (t) => {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString()
  })
  child.stderr.on('data', (c: Buffer) => {
    out += c.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  await waitFor('the demo announcement', () => out.includes('auth/login?ticket='), 60_000)
  const password = /password (\S+)/.exec(out)?.[1] ?? ''
  assert.ok(password, out)
  assert.match(out, new RegExp(`Open the console at http://localhost:${port}/ and sign in`))
  assert.doesNotMatch(out, /sign in with a login ticket/, 'people sign in through the IdP here')
  // The secrets are the demo's own (nobody else signs tokens with them): no warning about what they lack.
  assert.doesNotMatch(out, /GATEWAY_JWT_ISSUER|auth secrets not configured| WARN /)
  const banner = `olivia (operator of teams blue and red) or victor (viewer of team blue), password ${password}`
  const count = (s: string) => out.split(s).length - 1
  assert.equal(count(banner), 1)

  const b = await chromium(t)
  for (const host of ['127.0.0.1', 'localhost']) {
    const page = await (await b.newContext()).newPage()
    const status = await signInWithChromium(page, `http://localhost:`, `http://${host}:${port}/`, {
      username: 'olivia',
      password,
    })
    assert.equal(status, 303, `signed in from ${host} (not signin_state_invalid)`)
    await page.waitForSelector('.session-row >> text=demo-crm')
    await page.context().close()
  }
  // Said again when the IdP first showed its login form (the terminal had scrolled), once.
  assert.equal(count(banner), 2, out)
  // Readable lines: the time, the level, the message and the record's own fields; nothing of the process's.
  assert.match(
    out,
    new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  Server listening at http://127\\.0\\.0\\.1:${port}$`, 'm'),
  )
  assert.match(out, /^\d\d:\d\d:\d\d INFO {2}upstream event reader started {2}component=events kasmId=demo$/m)
  // The page's requests made no lines at the default level.
  assert.doesNotMatch(out, /incoming request|request completed/, 'request lines are at debug in the demo')
  child.kill('SIGTERM')
  assert.equal(await exited, 0)
  assert.match(out, /^\d\d:\d\d:\d\d INFO {2}shutdown complete {2}signal=SIGTERM durationMs=\d+$/m)
  const json = out.split('\n').filter((l) => l.trimStart().startsWith('{'))
  assert.deepEqual(json, [], 'no JSON line in the demo terminal')
})

test('outside the demo the request lines stay at info; the demo option puts them at debug', async (t) => {
  for (const [requestLog, level] of [
    [undefined, 30],
    ['debug', 20],
  ] as const) {
    const logs = captureLogs()
    const config = loadConfig(testEnv({ LOG_LEVEL: 'debug' }))
    const options = loggerOptions(config) as Record<string, unknown>
    const app = await buildApp(config, {
      logger: { ...options, stream: logs.logger.stream },
      ...(requestLog === undefined ? {} : { requestLog }),
    })
    t.after(() => app.close())
    assert.equal((await app.inject('/healthz')).statusCode, 200)
    const records = logs.records()
    for (const msg of ['incoming request', 'request completed']) {
      const line = records.find((r) => r.msg === msg)
      assert.equal(line?.level, level, `${msg} with requestLog ${requestLog ?? 'unset'}`)
    }
  }
})
