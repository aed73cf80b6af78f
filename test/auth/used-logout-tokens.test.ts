import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MemoryUsedLogoutTokens } from '../../src/auth/oidc/used-logout-tokens.ts'
import { until } from '../events/helpers.ts'

/** The memory ledger of back-channel logout tokens (the Redis one is tested through the route). */

test('a token is claimed once while it lives, again once it expired or was released', async () => {
  const used = new MemoryUsedLogoutTokens()
  // A replay is checked on a token that lives a minute: one that lives 50 ms may have expired before the
  // replay on a loaded machine (seen), and then its claim is rightly accepted.
  assert.equal(await used.claim('c', Date.now() + 60_000), true)
  assert.equal(await used.claim('c', Date.now() + 60_000), false, 'a replay')
  const soon = Date.now() + 50
  assert.equal(await used.claim('a', soon), true)
  assert.equal(await used.claim('b', Date.now() + 60_000), true)
  await used.release('b')
  assert.equal(await used.claim('b', Date.now() + 60_000), true, 'released: the retry is accepted')
  await until('a has expired', () => Date.now() > soon)
  assert.equal(await used.claim('a', Date.now() + 60_000), true, 'expired: no longer a replay')
})

test('bounded: expired entries go first, then the one that expires soonest', async () => {
  const used = new MemoryUsedLogoutTokens(3)
  const now = Date.now()
  await used.claim('gone', now + 30)
  await used.claim('late', now + 90_000)
  await used.claim('early', now + 60_000)
  await until('gone has expired', () => Date.now() > now + 30)
  assert.equal(await used.claim('d', now + 80_000), true)
  assert.equal(used.size, 3, 'the expired one made room')
  assert.equal(await used.claim('e', now + 70_000), true)
  assert.equal(used.size, 3)
  assert.equal(await used.claim('late', now + 90_000), false, 'kept')
  assert.equal(await used.claim('d', now + 80_000), false, 'kept')
  assert.equal(await used.claim('early', now + 60_000), true, 'the soonest to expire made room')
})
