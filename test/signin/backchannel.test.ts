import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { type TestContext, test } from 'node:test'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { credentialDigest } from '../../src/auth/credential-digest.ts'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { gatewayClient } from '../../src/dev/demo-idp.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { REDIS_TEST_URL } from '../cluster/redis-harness.ts'
import { until } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import {
  type Browser,
  CLIENT_ID,
  CLIENT_SECRET,
  type SignInStack,
  sessionCookie,
  signedIn,
  startReplicaOf,
  startSignInStack,
} from './harness.ts'

/**
 * Back-channel logout (OpenID Connect Back-Channel Logout 1.0): a logout token is used once (its `jti` is kept
 * until the token could no longer be accepted, in Redis in cluster mode; a replay is 400), and one naming only
 * a subject ends that person's sessions signed in through that issuer before its `iat`, nothing else. Real
 * logout tokens come from the real OpenID provider; the edge cases are tokens signed with its key by hand.
 */

const LOGOUT_EVENT = { 'http://schemas.openid.net/event/backchannel-logout': {} }

async function me(origin: string, cookie: string): Promise<number> {
  const res = await request(`${origin}auth/me`, { headers: { cookie } })
  await res.body.dump()
  return res.statusCode
}

function postLogout(base: string, token: string) {
  return request(`${base}auth/backchannel-logout`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ logout_token: token }).toString(),
  })
}

/** A logout token of the stack's IdP, signed with its own key; `claims` override the defaults. */
function logoutToken(stack: SignInStack, claims: Record<string, unknown>): Promise<string> {
  const iat = Math.floor(Date.now() / 1000)
  return stack.idp.sign(
    {
      iss: stack.idp.issuer,
      aud: CLIENT_ID,
      iat,
      exp: iat + 120,
      jti: randomBytes(12).toString('base64url'),
      events: LOGOUT_EVENT,
      ...claims,
    },
    { typ: 'logout+jwt' },
  )
}

/** A cookie session made from a bearer (`POST auth/session`), of `sub`. */
async function bearerCookie(stack: SignInStack, sub: string): Promise<string> {
  const res = await request(`${stack.base}auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await bearer({ sub, roles: ['operator'], teams: ['blue'] })}` },
  })
  assert.equal(res.statusCode, 201)
  await res.body.dump()
  const set = ([] as string[]).concat(res.headers['set-cookie'] ?? [])
  const cookie = set.find((c) => c.startsWith('krg_session='))?.split(';')[0]
  assert.ok(cookie)
  return cookie
}

/**
 * Registers the gateway at its IdP with a back-channel logout URI that records each logout token the IdP
 * posts, then passes it on to the gateway; returns the tokens seen and the gateway's answers.
 */
async function recordLogoutTokens(t: TestContext, stack: SignInStack) {
  const seen: { token: string; status: number }[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => {
      body += c
    })
    req.on('end', async () => {
      const token = new URLSearchParams(body).get('logout_token') ?? ''
      const answer = await postLogout(stack.base, token)
      seen.push({ token, status: answer.statusCode })
      res.writeHead(answer.statusCode, { 'content-type': 'application/json' })
      res.end(Buffer.from(await answer.body.arrayBuffer()))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const address = server.address()
  assert.ok(address !== null && typeof address === 'object')
  stack.idp.setClient({
    ...gatewayClient(stack.base, CLIENT_ID, CLIENT_SECRET),
    backchannelLogoutUri: `http://127.0.0.1:${address.port}/`,
  })
  return seen
}

/** The person signs out at the IdP itself, which posts a logout token to the gateway. */
async function signOutAtIdp(stack: SignInStack, browser: Browser): Promise<void> {
  const confirm = await browser.navigate(`${stack.idp.issuer}/session/end`)
  await browser.submit(confirm, '/session/end/confirm', { logout: 'yes' })
}

for (const mode of ['memory', 'redis'] as const) {
  test(`${mode}: the IdP's own logout token works once; replayed it is 400, on any replica`, async (t) => {
    const env = mode === 'redis' ? sharedRedisEnv(t) : {}
    const stack = await startSignInStack(t, { env: { GATEWAY_SIGNIN_FAILURES_MAX: '1000', ...env } })
    const seen = await recordLogoutTokens(t, stack)
    const { browser, cookie } = await signedIn(stack)
    await signOutAtIdp(stack, browser)
    await until('the IdP posted its logout token', () => seen.length === 1)
    assert.equal(seen[0]?.status, 200)
    assert.equal(await me(stack.base, cookie), 401)

    const { browser: again, cookie: fresh } = await signedIn(stack)
    const token = seen[0]?.token ?? ''
    const targets = [stack.base]
    if (mode === 'redis') targets.push(`${(await startReplicaOf(t, stack, env)).origin}/`)
    for (const base of targets) {
      const replay = await postLogout(base, token)
      assert.equal(replay.statusCode, 400, base)
      const body = (await replay.body.json()) as { error: string; message: string }
      assert.equal(body.error, 'logout_token_invalid')
      assert.match(body.message, /used already/)
    }
    assert.equal(await me(stack.base, fresh), 200, 'the replay ended nothing')

    if (mode === 'redis') {
      const redis = new Redis(REDIS_TEST_URL)
      t.after(() => redis.disconnect())
      const { iss, jti, exp } = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString())
      const key = clusterKeys(env.GATEWAY_REDIS_PREFIX ?? '').usedLogoutToken(
        credentialDigest(`${iss} ${jti}`),
      )
      const expiresAt = Number(await redis.pexpiretime(key))
      // Kept until the token could no longer be accepted: its exp plus the clock tolerance, no longer.
      assert.ok(expiresAt > Date.now(), 'the jti is kept in Redis')
      assert.ok(expiresAt <= (exp + 31) * 1000, `kept until ${expiresAt}, exp ${exp}`)
    }
    await signOutAtIdp(stack, again)
    await until('the second sign-out', () => seen.length === 2)
    assert.equal(seen[1]?.status, 200, 'a new logout token of the IdP is not a replay')
    assert.equal(await me(stack.base, fresh), 401)
  })
}

test("a sub-only logout token ends that issuer's sign-ins before its iat: not later ones, not bearer-made cookie sessions", async (t) => {
  const stack = await startSignInStack(t, { env: { GATEWAY_SIGNIN_FAILURES_MAX: '1000' } })
  const before = await signedIn(stack)
  const fromBearer = await bearerCookie(stack, 'olivia')
  // The logout was issued in the second the first sign-in happened; the second sign-in comes after it.
  const iat = Math.floor(Date.now() / 1000)
  await until('the next second', () => Date.now() >= (iat + 1) * 1000)
  const after = await signedIn(stack)

  const token = await logoutToken(stack, { sub: 'olivia', iat })
  const res = await postLogout(stack.base, token)
  assert.equal(res.statusCode, 200)
  assert.deepEqual(await res.body.json(), { ended: 1 })
  assert.equal(await me(stack.base, before.cookie), 401, 'signed in before iat: ended')
  assert.equal(await me(stack.base, after.cookie), 200, 'signed in after iat: kept')
  assert.equal(await me(stack.base, fromBearer), 200, 'a cookie session made from a bearer: kept')

  const replay = await postLogout(stack.base, token)
  assert.equal(replay.statusCode, 400)
  assert.equal(((await replay.body.json()) as { error: string }).error, 'logout_token_invalid')

  // A new token, issued now, covers the later sign-in too; the bearer's session still stays.
  const now = await postLogout(stack.base, await logoutToken(stack, { sub: 'olivia' }))
  assert.deepEqual(await now.body.json(), { ended: 1 })
  assert.equal(await me(stack.base, after.cookie), 401)
  assert.equal(await me(stack.base, fromBearer), 200)
})

test('cluster: a sub-only logout token of one issuer leaves the same sub signed in through another', async (t) => {
  const env = { ...sharedRedisEnv(t), GATEWAY_SIGNIN_FAILURES_MAX: '1000' }
  // Two gateways on one Redis, each signing people in through its own IdP (as after an issuer change).
  const a = await startSignInStack(t, { env })
  const b = await startSignInStack(t, { env })
  const atA = await signedIn(a)
  const atB = await signedIn(b)
  const res = await postLogout(b.base, await logoutToken(b, { sub: 'olivia' }))
  assert.deepEqual(await res.body.json(), { ended: 1 })
  assert.equal(await me(b.base, atB.cookie), 401)
  assert.equal(await me(a.base, atA.cookie), 200, 'olivia of the other issuer')
  assert.equal(await me(a.base, sessionCookie(atA.browser)), 200)
})
