import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createTokenVerifier, TokenRefused } from '../../src/auth/jwt.ts'
import { VerifiedTokens } from '../../src/auth/verified-tokens.ts'
import { bearer, TEST_AUDIENCE, TEST_ISSUER, TEST_JWT_SECRET } from '../helpers/jwt.ts'

const exp = 2_000_000_000 // seconds

test('a verified token is kept until its exp plus the clock tolerance, the way jose judges it', () => {
  let now = (exp - 60) * 1000
  const cache = new VerifiedTokens({ max: 10, clockToleranceS: 30, now: () => now })
  cache.add('t1', { sub: 'alice', exp })
  assert.equal(cache.get('t1')?.sub, 'alice')
  // jose: refused once exp <= floor(now / 1000) - tolerance.
  now = (exp + 30) * 1000 - 1
  assert.equal(cache.get('t1')?.sub, 'alice', 'the last millisecond jose would still accept')
  now = (exp + 30) * 1000
  assert.equal(cache.get('t1'), undefined, 'from the first instant jose would refuse, not a hit')
  assert.equal(cache.get('t1'), undefined, 'and dropped')
  assert.equal(cache.size, 0)
})

test('notAfter bounds an entry before its exp; a payload without exp is never kept', () => {
  let now = 1_000_000
  const cache = new VerifiedTokens({ max: 10, clockToleranceS: 0, now: () => now })
  cache.add('jwks', { sub: 'bob', exp }, now + 60_000)
  cache.add('no-exp', { sub: 'carol' })
  assert.equal(cache.get('no-exp'), undefined)
  now += 59_999
  assert.equal(cache.get('jwks')?.sub, 'bob')
  now += 1
  assert.equal(cache.get('jwks'), undefined)
})

test('the least recently used token goes first when the cache is full', () => {
  const cache = new VerifiedTokens({ max: 2, clockToleranceS: 0, now: () => 0 })
  cache.add('a', { sub: 'a', exp })
  cache.add('b', { sub: 'b', exp })
  assert.ok(cache.get('a'), 'a used: b is now the least recent')
  cache.add('c', { sub: 'c', exp })
  assert.equal(cache.size, 2)
  assert.equal(cache.get('b'), undefined)
  assert.equal(cache.get('a')?.sub, 'a')
  assert.equal(cache.get('c')?.sub, 'c')
})

test('a token used on every request stays however many others come and go', () => {
  const cache = new VerifiedTokens({ max: 4, clockToleranceS: 0, now: () => 0 })
  cache.add('hot', { sub: 'hot', exp })
  for (let i = 0; i < 50; i++) {
    cache.add(`cold-${i}`, { sub: 'cold', exp })
    assert.equal(cache.get('hot')?.sub, 'hot', `after ${i + 1} others`)
    assert.ok(cache.size <= 4)
  }
  assert.equal(cache.get('cold-0'), undefined, 'the cold ones went instead')
})

test('the verifier answers a repeated token from the cache, and still refuses every bad one each time', async () => {
  const verifier = createTokenVerifier({
    secret: TEST_JWT_SECRET,
    jwksAlgorithms: [],
    jwksTimeoutMs: 1000,
    issuer: TEST_ISSUER,
    audience: TEST_AUDIENCE,
    clockToleranceS: 0,
  })
  const token = await bearer({ sub: 'alice' })
  const first = await verifier.verify(token)
  const second = await verifier.verify(token)
  assert.equal(second, first, 'the same verified payload, not a second verification')
  assert.ok(Object.isFrozen(second), 'shared between requests, so nobody may change it')
  // A forged signature on the same claims is never mistaken for the verified token.
  const forged = `${token.slice(0, token.lastIndexOf('.') + 1)}${'A'.repeat(43)}`
  for (let i = 0; i < 2; i++) {
    await assert.rejects(
      verifier.verify(forged),
      (err) => err instanceof TokenRefused && err.reason === 'bad_signature',
    )
  }
  const expired = await bearer({ sub: 'alice' }, { expiresIn: Math.floor(Date.now() / 1000) - 10 })
  for (let i = 0; i < 2; i++) {
    await assert.rejects(
      verifier.verify(expired),
      (err) => err instanceof TokenRefused && err.reason === 'expired',
    )
  }
})
