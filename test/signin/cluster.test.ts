import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { REDIS_TEST_URL } from '../cluster/redis-harness.ts'
import { Browser, sessionCookie, signInAt, startReplicaOf, startSignInStack } from './harness.ts'

const JWE = /^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/

test('cluster mode: the callback may reach another replica; IdP tokens and login attempts are sealed in Redis', async (t) => {
  const cluster = sharedRedisEnv(t)
  const prefix = cluster.GATEWAY_REDIS_PREFIX ?? ''
  const a = await startSignInStack(t, { env: cluster })
  // Replica B: the same configuration (same public origin and redirect URI), another port.
  const b = await startReplicaOf(t, a, cluster)
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())

  const browser = new Browser()
  const toCallback = await signInAt(a, browser, {
    stopAtCallback: true,
    returnTo: '/desktop/k1/vnc/index.html',
  })
  const [attemptKey] = await redis.keys(`${prefix}login:*`)
  assert.ok(attemptKey, 'the login attempt waits in Redis')
  const attempt = (await redis.get(attemptKey)) ?? ''
  assert.match(attempt, JWE, 'sealed (it holds the PKCE verifier)')

  const callback = new URL(toCallback.location ?? '')
  callback.host = new URL(b.origin).host
  const landed = await browser.request(callback.href)
  assert.equal(landed.status, 303, landed.text)
  assert.equal(new URL(landed.location ?? '').pathname, '/desktop/k1/vnc/index.html')
  assert.equal(await redis.exists(attemptKey), 0, 'used once')

  // Signed in on B, known on A.
  const me = await request(`${a.base}auth/me`, { headers: { cookie: sessionCookie(browser) } })
  assert.equal(((await me.body.json()) as { sub: string }).sub, 'olivia')
  const keys = await redis.keys(`${prefix}cookie:*`)
  assert.equal(keys.length, 1)
  const stored = await redis.hgetall(keys[0] ?? '')
  const record = JSON.parse(stored.record ?? '{}') as { idp?: { sid?: string; sealedTokens: string } }
  assert.match(record.idp?.sealedTokens ?? '', JWE)
  assert.ok(record.idp?.sid, 'the IdP session, for back-channel logout')
  assert.doesNotMatch(JSON.stringify(stored), /eyJ[A-Za-z0-9_-]*\.eyJ/, 'no ID token in the clear')
  assert.ok(stored.refreshAt, 'a refresh is scheduled')
})
