import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { test } from 'node:test'
import { request } from 'undici'
import { freePort } from '../cluster/redis-harness.ts'
import { openSse } from '../events/helpers.ts'
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
      // The machine's load is not what this test is about: on a loaded one, a gateway just booted through tsx
      // has a mean event-loop delay over the default 1 s and sheds the first request with 503 (as testEnv says).
      GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
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
  // The demo boots through tsx (its IdP, a simulated runtime, the gateway): under a loaded CI machine that has
  // taken over 20 s. The wait ends as soon as the line appears; the deadline only bounds a boot that hangs.
  await waitFor('the demo announcement', () => out.includes('auth/login?ticket='), 60_000)
  assert.doesNotMatch(out, /oidc-provider WARNING|Unsupported runtime/)
  const password = /password (\S+)/.exec(out)?.[1]
  assert.ok(password, out)
  assert.match(out, /sessions "demo" \(team blue\) and "demo-crm" \(team red\) are simulated runtimes/)
  assert.match(
    out,
    new RegExp(`Open the console at ${origin}/ and sign in through the demo identity provider`),
  )
  assert.match(out, /olivia \(operator of teams blue and red\) or victor \(viewer of team blue\)/)
  // The console at / is where a person starts: signed out, it sends them to sign in.
  const console = await new Browser().request(`${origin}/`)
  assert.equal(console.status, 303)
  assert.equal(console.location, `${origin}/auth/login?return_to=%2F`)

  const stack = { base: `${origin}/`, origin } as SignInStack
  const olivia = new Browser()
  await signInAt(stack, olivia, { username: 'olivia', password })
  const cookie = sessionCookie(olivia)
  const oliviaMe = (await (await request(`${origin}/auth/me`, { headers: { cookie } })).body.json()) as {
    roles: string[]
    teams: string[]
  }
  assert.deepEqual([oliviaMe.roles, oliviaMe.teams], [['operator'], ['blue', 'red']])
  // Her overview: both demo sessions, two teams, two plays.
  const overview = await openSse(`${origin}/api/overview`, { cookie })
  t.after(() => overview.close())
  const apps = () =>
    new Map(
      overview.events
        .filter((e) => e.event === 'session')
        .map((e) => JSON.parse(e.data) as { kasmId: string; team: string; summary: { app?: string } | null })
        .map((s) => [s.kasmId, `${s.team}:${s.summary?.app ?? ''}`]),
    )
  await waitFor('both plays in the overview', () => apps().get('demo-crm') === 'red:crm')
  assert.equal(apps().get('demo'), 'blue:expenses')
  const inbox = await request(`${origin}/desktop/demo/mcp/inbox`, { headers: { cookie } })
  assert.equal(inbox.statusCode, 200)
  await inbox.body.dump()

  const victor = new Browser()
  await signInAt(stack, victor, { username: 'victor', password })
  const me = await request(`${origin}/auth/me`, { headers: { cookie: sessionCookie(victor) } })
  assert.deepEqual(((await me.body.json()) as { roles: string[] }).roles, ['viewer'])
  // Team red's session is not his: it answers as if it did not exist.
  const foreign = await request(`${origin}/desktop/demo-crm/mcp/inbox`, {
    headers: { cookie: sessionCookie(victor) },
  })
  assert.equal(foreign.statusCode, 404)
  await foreign.body.dump()
  const wrong = await signInAt(stack, new Browser(), { username: 'olivia', password: 'not-it' })
  assert.match(wrong.text, /Wrong username or password/)

  // The one-time link of 0.1.0 still signs in.
  const ticket = /(http:\S+auth\/login\?ticket=\S+)/.exec(out)?.[1] ?? ''
  const linked = await new Browser().request(ticket)
  assert.equal(linked.status, 303)

  child.kill('SIGTERM')
  assert.equal(await exited, 0)
})
