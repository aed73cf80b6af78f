import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { test } from 'node:test'
import { request } from 'undici'
import { freePort } from '../cluster/redis-harness.ts'
import { waitFor } from '../helpers/wait.ts'
import { Browser, type SignInStack, sessionCookie, signInAt } from '../signin/harness.ts'

/** `npm start` (src/server.ts, nothing configured): one command, the demo session and the demo's real sign-in. */
test('the demo signs people in through its own OpenID provider; the one-time link stays', async (t) => {
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      HOST: '127.0.0.1',
      GATEWAY_PUBLIC_ORIGIN: origin,
      LOG_LEVEL: 'warn',
    },
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
  await waitFor('the demo announcement', () => out.includes('auth/login?ticket='), 20_000)
  assert.doesNotMatch(out, /oidc-provider WARNING|Unsupported runtime/)
  const password = /password (\S+)/.exec(out)?.[1]
  assert.ok(password, out)
  assert.match(out, new RegExp(`Sign in at ${origin}/auth/login through the demo identity provider`))
  assert.match(out, /olivia \(operator of team blue\) or victor \(viewer of team blue\)/)

  const stack = { base: `${origin}/`, origin } as SignInStack
  const olivia = new Browser()
  await signInAt(stack, olivia, { username: 'olivia', password })
  const cookie = sessionCookie(olivia)
  const oliviaMe = (await (await request(`${origin}/auth/me`, { headers: { cookie } })).body.json()) as {
    roles: string[]
    teams: string[]
  }
  assert.deepEqual([oliviaMe.roles, oliviaMe.teams], [['operator'], ['blue']])
  const inbox = await request(`${origin}/desktop/demo/mcp/inbox`, { headers: { cookie } })
  assert.equal(inbox.statusCode, 200)
  await inbox.body.dump()

  const victor = new Browser()
  await signInAt(stack, victor, { username: 'victor', password })
  const me = await request(`${origin}/auth/me`, { headers: { cookie: sessionCookie(victor) } })
  assert.deepEqual(((await me.body.json()) as { roles: string[] }).roles, ['viewer'])
  const wrong = await signInAt(stack, new Browser(), { username: 'olivia', password: 'not-it' })
  assert.match(wrong.text, /Wrong username or password/)

  // The one-time link of 0.1.0 still signs in.
  const ticket = /(http:\S+auth\/login\?ticket=\S+)/.exec(out)?.[1] ?? ''
  const linked = await new Browser().request(ticket)
  assert.equal(linked.status, 303)

  child.kill('SIGTERM')
  assert.equal(await exited, 0)
})
