import assert from 'node:assert/strict'
import { describe, type TestContext, test } from 'node:test'
import pino from 'pino'
import {
  type CookieSessionRecord,
  type CookieSessionStore,
  MemoryCookieStore,
} from '../../src/auth/cookie-store.ts'
import { ChangeFeed } from '../../src/cluster/change-feed.ts'
import { RedisCookieStore } from '../../src/cluster/cookie-store.ts'
import { type StoreRedis, storeConnection, storeKeys, until } from '../cluster/redis-harness.ts'

/**
 * What every cookie session store promises: the refresh claim, identity updates, IdP-session revocation,
 * revocation events. Run by cookie-store-contract.test.ts on memory and Redis, and by
 * test/cluster/redis-cluster.test.ts on a Redis Cluster.
 */

const record = (sub: string, now: number, idp?: CookieSessionRecord['idp']): CookieSessionRecord => ({
  sub,
  roles: ['operator'],
  teams: ['blue'],
  createdAt: now,
  expiresAt: now + 3600_000,
  lastSeenAt: now,
  ...(idp === undefined ? {} : { idp }),
})

/** Two replicas' views of one store (the same object for memory). */
export type CookieStorePair = { writer: CookieSessionStore; reader: CookieSessionStore }

/** The memory store, as both replicas. */
export async function memoryCookiePair(t: TestContext): Promise<CookieStorePair> {
  const store = new MemoryCookieStore({ idleMs: 60_000 })
  t.after(() => store.close())
  return { writer: store, reader: store }
}

/** Two replicas' Redis cookie stores on `redis` (the shared test Redis, or a Redis Cluster): each its own connections and feed. */
export function redisCookiePair(redis: StoreRedis): (t: TestContext) => Promise<CookieStorePair> {
  return async (t) => {
    const keys = storeKeys(t, redis)
    const log = pino({ level: 'silent' })
    const replica = async () =>
      new RedisCookieStore({
        command: await storeConnection(t, redis),
        keys,
        idleMs: 60_000,
        feed: new ChangeFeed(await storeConnection(t, redis, 'subscriber'), log),
      })
    return { writer: await replica(), reader: await replica() }
  }
}

const ISSUER = 'https://idp.example'
const OTHER_ISSUER = 'https://other-idp.example'

/** Registers the contract's tests for one store, `make` building a fresh pair per test. */
export function cookieStoreContract(name: string, make: (t: TestContext) => Promise<CookieStorePair>): void {
  describe(`cookie store contract: ${name}`, () => {
    test('a due refresh is claimed once; the identity can be replaced while active, never revived', async (t) => {
      const { writer, reader } = await make(t)
      const now = Date.now()
      await writer.create(
        'h1',
        record('ann', now, { iss: ISSUER, sid: 'sid-1', refreshAt: now - 1, sealedTokens: 'sealed' }),
      )
      await writer.create('h2', record('ann', now))
      assert.equal(await reader.claimRefresh('h1', now, 30_000), true)
      assert.equal(await writer.claimRefresh('h1', now, 30_000), false, 'claimed already')
      assert.equal(await writer.claimRefresh('h2', now, 30_000), false, 'nothing to refresh')
      const claimed = await reader.get('h1')
      assert.equal(claimed?.state === 'active' ? claimed.record.idp?.refreshAt : 0, now + 30_000)

      const updated = record('ann', 0, {
        iss: ISSUER,
        sid: 'sid-1',
        refreshAt: now + 300_000,
        sealedTokens: 'rotated',
      })
      updated.roles = ['viewer']
      updated.teams = []
      assert.equal(await reader.update('h1', updated), true)
      const got = await writer.get('h1')
      assert.ok(got?.state === 'active')
      assert.deepEqual(got.record.roles, ['viewer'])
      assert.deepEqual(got.record.teams, [], 'empty teams survive')
      assert.equal(got.record.idp?.sealedTokens, 'rotated')
      assert.equal(got.record.idp?.refreshAt, now + 300_000)
      assert.equal(got.record.createdAt, now, 'times stay as stored')
      assert.equal(await writer.claimRefresh('h1', now + 300_000, 1000), true, 'due again at the new time')

      assert.equal(await writer.revoke('h1'), true)
      assert.equal(await reader.update('h1', updated), false)
      assert.equal((await reader.get('h1'))?.state, 'revoked')
      assert.equal(await reader.claimRefresh('h1', now + 10_000_000, 1000), false)
    })

    test('revocations are heard by every replica: one, a subject, an IdP session', async (t) => {
      const { writer, reader } = await make(t)
      const heard: string[][] = []
      const stop = await reader.onRevoked({ revoked: (h) => heard.push([...h].sort()), resync: () => {} })
      t.after(stop)
      const now = Date.now()
      const link = (sid: string, iss = ISSUER) => ({ iss, sid, sealedTokens: 'x' })
      await writer.create('a1', record('ann', now, link('s-ann')))
      await writer.create('a2', record('ann', now, link('s-ann')))
      await writer.create('a3', record('ann', now, link('s-other')))
      await writer.create('a4', record('ann', now, link('s-ann', OTHER_ISSUER)))
      await writer.create('b1', record('ben', now))
      await writer.create('b2', record('ben', now))

      assert.equal(await writer.revoke('b1'), true)
      await until('one revocation heard', () => heard.length === 1)
      assert.deepEqual(heard[0], ['b1'])
      assert.equal(await writer.revokeIdpSession(ISSUER, 's-ann'), 2)
      await until('the IdP session heard', () => heard.length === 2)
      assert.deepEqual(heard[1], ['a1', 'a2'])
      assert.equal(await writer.revokeIdpSession(ISSUER, 's-ann'), 0, 'nothing left of it')
      assert.equal((await reader.get('a3'))?.state, 'active', 'another IdP session of ann is untouched')
      assert.equal((await reader.get('a4'))?.state, 'active', "the same sid at another issuer is another's")
      assert.equal(await writer.revokeAllOf('ben'), 1)
      await until('the subject heard', () => heard.length === 3)
      assert.deepEqual(heard[2], ['b2'])
      assert.equal(await writer.revokeAllOf('ben'), 0)
      assert.equal(await writer.revoke('b2'), false, 'no second revocation, nothing heard')
      assert.equal(heard.length, 3)
    })

    test("a subject's IdP logout: that issuer's sign-ins begun before the time, never a bearer's", async (t) => {
      const { writer, reader } = await make(t)
      const heard: string[][] = []
      const stop = await reader.onRevoked({ revoked: (h) => heard.push([...h].sort()), resync: () => {} })
      t.after(stop)
      const now = Date.now()
      const signedIn = (at: number, iss = ISSUER) =>
        record('cal', at, { iss, sid: `s-${at}`, sealedTokens: 'x' })
      await writer.create('c1', signedIn(now - 2000))
      await writer.create('c2', signedIn(now - 1))
      await writer.create('c3', signedIn(now))
      await writer.create('c4', signedIn(now - 2000, OTHER_ISSUER))
      // A cookie session made from a bearer (POST auth/session): no issuer of sign-in.
      await writer.create('c5', record('cal', now - 2000))
      await writer.create('d1', record('dee', now - 2000, { iss: ISSUER, sealedTokens: 'x' }))

      assert.equal(await writer.revokeIdpSubject(ISSUER, 'cal', now), 2)
      await until('the revocation heard', () => heard.length === 1)
      assert.deepEqual(heard[0], ['c1', 'c2'])
      const states = await Promise.all(
        ['c3', 'c4', 'c5', 'd1'].map(async (h) => (await reader.get(h))?.state),
      )
      assert.deepEqual(states, ['active', 'active', 'active', 'active'])
      assert.equal(await writer.revokeIdpSubject(ISSUER, 'cal', now), 0, 'nothing more before that time')
      assert.equal(await writer.revokeIdpSubject(ISSUER, 'cal', now + 1), 1, 'c3, begun at that time')
      assert.equal(await writer.revokeIdpSubject(OTHER_ISSUER, 'cal', now + 1), 1, 'c4')
      assert.equal((await reader.get('c5'))?.state, 'active', "the bearer's, whatever the issuer")
      // Sign out everywhere still means everywhere.
      assert.equal(await writer.revokeAllOf('cal'), 1)
      assert.equal((await reader.get('c5'))?.state, 'revoked')
    })
  })
}
