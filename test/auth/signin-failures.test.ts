import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { auth, call, failures } from './harness.ts'

/** Item 7 of the hostile-clients issue: failed sign-ins are limited per client address, before authentication. */

const forged = async () =>
  auth(await bearer({}, { secret: 'not-the-gateway-secret-but-long-enough-0123456789' }))

test('an address that failed too many sign-ins is refused before its credential is checked, good ones too', async (t) => {
  const gw = await startGateway({ GATEWAY_SIGNIN_FAILURES_MAX: '3', GATEWAY_TRUST_PROXY: '127.0.0.1' })
  t.after(() => gw.close())
  const from = (address: string) => ({ 'x-forwarded-for': address })
  const attacker = from('203.0.113.7')
  const good = auth(await bearer())

  // What a person's browser and stale tabs send never counts: nothing at all, an expired token.
  for (let i = 0; i < 5; i++) {
    assert.equal((await call(`${gw.url}/auth/me`, { headers: attacker })).status, 401)
    const expired = auth(await bearer({}, { expiresIn: -120 }))
    assert.equal((await call(`${gw.url}/auth/me`, { headers: { ...attacker, ...expired } })).status, 401)
  }
  assert.equal((await call(`${gw.url}/auth/me`, { headers: { ...attacker, ...good } })).status, 200)

  // Forged tokens, a made-up cookie and a bad one-time link do.
  const statuses: number[] = []
  statuses.push((await call(`${gw.url}/auth/me`, { headers: { ...attacker, ...(await forged()) } })).status)
  statuses.push(
    (await call(`${gw.url}/auth/me`, { headers: { ...attacker, cookie: 'krg_session=guess' } })).status,
  )
  statuses.push((await call(`${gw.url}/auth/login?ticket=${'x'.repeat(43)}`, { headers: attacker })).status)
  assert.deepEqual(statuses, [401, 401, 401])

  const refused = await call(`${gw.url}/auth/me`, { headers: { ...attacker, ...good } })
  assert.equal(refused.status, 429, 'even a good credential waits')
  assert.equal(refused.body.error, 'signin_rate_limited')
  const wait = Number(refused.headers['retry-after'])
  assert.ok(wait > 0 && wait <= 300, `Retry-After ${refused.headers['retry-after']}`)
  assert.equal(
    (await call(`${gw.url}/desktop/k1/mcp/inbox`, { headers: { ...attacker, ...(await forged()) } })).status,
    429,
  )
  assert.equal(await failures(gw.app, 'signin_rate_limited'), 2)
  // The good token was verified and kept before: a v1 route knows it without verifying, and still refuses.
  const known = await call(`${gw.url}/desktop/k1/mcp/inbox`, { headers: { ...attacker, ...good } })
  assert.equal(known.status, 429)
  assert.equal(known.body.error, 'signin_rate_limited')
  // Another address behind the same trusted proxy is not affected.
  assert.equal(
    (await call(`${gw.url}/auth/me`, { headers: { ...from('198.51.100.9'), ...good } })).status,
    200,
  )
})

test('without a trusted proxy X-Forwarded-For is ignored: a spoofed address does not escape the limit', async (t) => {
  const gw = await startGateway({ GATEWAY_SIGNIN_FAILURES_MAX: '2' })
  t.after(() => gw.close())
  for (let i = 0; i < 2; i++)
    assert.equal(
      (
        await call(`${gw.url}/auth/me`, {
          headers: { 'x-forwarded-for': `10.0.0.${i}`, ...(await forged()) },
        })
      ).status,
      401,
    )
  const spoofed = await call(`${gw.url}/auth/me`, {
    headers: { 'x-forwarded-for': '10.9.9.9', ...auth(await bearer()) },
  })
  assert.equal(spoofed.status, 429)
})

test('cluster mode: failures on every replica count together', async (t) => {
  const env = { ...sharedRedisEnv(t), GATEWAY_SIGNIN_FAILURES_MAX: '4' }
  const a = await startGateway(env)
  t.after(() => a.close())
  const b = await startGateway(env)
  t.after(() => b.close())
  const attempt = async (url: string) => (await call(`${url}/auth/me`, { headers: await forged() })).status
  assert.deepEqual([await attempt(a.url), await attempt(b.url), await attempt(a.url)], [401, 401, 401])
  // The fourth failure overall, on B: B's count says four, so B refuses from now on.
  assert.equal(await attempt(b.url), 401)
  assert.equal(await attempt(b.url), 429)
  // A learns it at its next failure (the shared count is past the limit), then refuses too.
  assert.equal(await attempt(a.url), 401)
  assert.equal(await attempt(a.url), 429)
  assert.equal((await call(`${a.url}/auth/me`, { headers: auth(await bearer()) })).status, 429)
})
