import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { loggerOptions } from '../../src/logger.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { chromiumFor } from '../helpers/chromium.ts'
import { testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { captureLogs } from '../sessions/capture-logs.ts'
import { signInWithChromium } from '../signin/harness.ts'

/**
 * `npm start` as a newcomer meets it (nothing configured, the default log level): the terminal says how to
 * sign in and stays readable, and the console signs in at whichever local address the person opens.
 */
test('the demo: both local addresses sign in; its terminal shows no request lines, no ticket warning, and the sign-in again at the first login', async (t) => {
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
  const banner = `olivia (operator of teams blue and red) or victor (viewer of team blue), password ${password}`
  const count = (s: string) => out.split(s).length - 1
  assert.equal(count(banner), 1)

  const b = await chromiumFor(t)
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
  // The page's requests made no lines at the default level.
  const lines = out.split('\n').filter((l) => l.startsWith('{'))
  const requestLines = lines.filter((l) => /"msg":"(incoming request|request completed)"/.test(l))
  assert.deepEqual(requestLines, [], 'request lines are at debug in the demo')
  child.kill('SIGTERM')
  assert.equal(await exited, 0)
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
