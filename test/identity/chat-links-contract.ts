import assert from 'node:assert/strict'
import { describe, type TestContext, test } from 'node:test'
import type { IdpRefresher } from '../../src/auth/cookie-sessions.ts'
import type { Role } from '../../src/auth/operator.ts'
import { RedisChatLinkStore } from '../../src/cluster/chat-link-store.ts'
import {
  type ChatLinkStore,
  chatAccountKey,
  MemoryChatLinkStore,
} from '../../src/identity/chat-link-store.ts'
import { ChatLinks } from '../../src/identity/chat-links.ts'
import { type StoreRedis, storeConnection, storeKeys, until } from '../cluster/redis-harness.ts'

/**
 * Linked chat accounts over each store (this process's memory, Redis as two replicas see it, and a Redis
 * Cluster in test/cluster/redis-cluster.test.ts): a link's
 * life (made, replaced, ended by its time, by a person's or an IdP session's end), its refresh claimed once,
 * a refusal suspending it, a use that cannot wait long; and the link tokens.
 */

/** A chat account the tests link. */
export const OLIVIA = { chat: 'slack' as const, workspace: 'T0TEST001', user: 'U0OLIVIA1' }
const OSCAR = { chat: 'slack' as const, workspace: 'T0TEST001', user: 'U0OSCAR01' }
const claims = (sub: string, roles: Role[] = ['operator']) => ({ sub, name: sub, roles, teams: ['blue'] })
const ISS = 'https://idp.test'
const idp = (sid: string, iss = ISS) => ({ iss, sid, tokens: { refreshToken: `rt-${sid}`, idToken: 'id' } })

/** Two replicas' views of one store (the same object for memory). */
export type ChatLinkPair = { writer: ChatLinkStore; reader: ChatLinkStore }

/** The memory store, as both replicas. */
export async function memoryChatLinkPair(t: TestContext): Promise<ChatLinkPair> {
  const store = new MemoryChatLinkStore()
  t.after(() => store.close())
  return { writer: store, reader: store }
}

/** Two replicas' Redis chat link stores on `redis` (the shared test Redis, or a Redis Cluster). */
export function redisChatLinkPair(redis: StoreRedis): (t: TestContext) => Promise<ChatLinkPair> {
  return async (t) => {
    const keys = storeKeys(t, redis)
    return {
      writer: new RedisChatLinkStore(await storeConnection(t, redis), keys),
      reader: new RedisChatLinkStore(await storeConnection(t, redis), keys),
    }
  }
}

/** Registers the linked-chat-account tests for one store, `make` building a fresh pair per test. */
export function chatLinkContract(name: string, make: (t: TestContext) => Promise<ChatLinkPair>): void {
  describe(`chat links: ${name}`, () => {
    test('a link is made, read on another replica, replaced by a relink, and ends by its time', async (t) => {
      const { writer, reader } = await make(t)
      const links = new ChatLinks(writer, { ttlMs: 60_000 })
      const made = await links.link(
        { ...OLIVIA, userName: 'olivia', workspaceName: 'krg' },
        claims('olivia'),
        idp('s1'),
      )
      const there = await new ChatLinks(reader, { ttlMs: 60_000 }).check(OLIVIA)
      assert.ok(there.ok)
      assert.deepEqual(
        [
          there.record.sub,
          there.record.userName,
          there.record.workspaceName,
          there.record.idp?.sid,
          there.record.state,
        ],
        ['olivia', 'olivia', 'krg', 's1', 'active'],
      )
      assert.equal(there.record.expiresAt, made.expiresAt)
      // The same Slack account linked again, by someone else: theirs now, and no longer the first person's.
      await links.link(OLIVIA, claims('oscar'), idp('s2'))
      assert.deepEqual(
        (await reader.listOf('olivia')).map((r) => r.sub),
        [],
      )
      assert.deepEqual(
        (await reader.listOf('oscar')).map((r) => chatAccountKey(r)),
        ['slack:T0TEST001:U0OLIVIA1'],
      )
      assert.equal(await reader.removeIdpSession(ISS, 's1'), 0, 'the replaced link left its old IdP session')

      const short = new ChatLinks(writer, { ttlMs: 300 })
      await short.link(OSCAR, claims('oscar'))
      assert.ok((await short.check(OSCAR)).ok)
      await until('ended by its time', async () => !(await short.check(OSCAR)).ok)
      assert.deepEqual(await short.check(OSCAR), { ok: false, reason: 'unlinked' })
      assert.deepEqual(
        (await reader.list(10)).map((r) => r.user),
        [OLIVIA.user],
        'an ended link is not listed',
      )
    })

    test('a person’s end, an IdP session’s end and a logout naming the person remove their links, on every replica', async (t) => {
      const { writer, reader } = await make(t)
      const links = new ChatLinks(writer, { ttlMs: 60_000 })
      await links.link(OLIVIA, claims('olivia'), idp('s1'))
      await links.link(OSCAR, claims('oscar'), idp('s1'))
      const third = { ...OSCAR, user: 'U0THIRD01' }
      await links.link(third, claims('olivia'), idp('s3'))
      assert.deepEqual(
        (await reader.list(10)).map((r) => r.user).sort(),
        [OLIVIA.user, OSCAR.user, third.user].sort(),
      )
      // Another issuer's session of the same id ends nothing here.
      assert.equal(await reader.removeIdpSession('https://other.test', 's1'), 0)
      assert.equal(await reader.removeIdpSession(ISS, 's1'), 2)
      assert.equal(await reader.get(chatAccountKey(OLIVIA)), null)
      assert.equal(await reader.removeOf('olivia'), 1)
      assert.equal(await writer.get(chatAccountKey(third)), null)
      assert.equal(await reader.removeOf('olivia'), 0)
      assert.equal(await reader.remove(chatAccountKey(OSCAR)), null)

      // A logout naming only the person ends their links through that issuer made before it, nothing else.
      const before = Date.now()
      await links.link(OLIVIA, claims('olivia'), idp('s4'))
      await links.link(third, claims('olivia'), idp('s5', 'https://other.test'))
      await new Promise((resolve) => setTimeout(resolve, 5))
      assert.equal(
        await reader.removeIdpSubject(ISS, 'olivia', before),
        0,
        'made after the logout was issued',
      )
      assert.equal(await reader.removeIdpSubject(ISS, 'olivia', Date.now()), 1)
      assert.equal(await reader.get(chatAccountKey(OLIVIA)), null)
      assert.notEqual(await reader.get(chatAccountKey(third)), null, "another issuer's sign-in")
    })

    test('a due refresh is made once for uses at once; it updates the roles, or suspends the link when refused', async (t) => {
      const { writer, reader } = await make(t)
      let calls = 0
      let answer: Awaited<ReturnType<IdpRefresher>> = {
        claims: claims('olivia', ['viewer']),
        tokens: { refreshToken: 'rt2' },
      }
      const refresher: IdpRefresher = async () => {
        calls++
        return answer
      }
      // Links made due at once; a refresh by the checkers makes the next one due in a minute.
      const linker = new ChatLinks(writer, { ttlMs: 60_000, refresher, refreshMs: 1 })
      const links = new ChatLinks(writer, { ttlMs: 60_000, refresher, refreshMs: 60_000 })
      const other = new ChatLinks(reader, { ttlMs: 60_000, refresher, refreshMs: 60_000 })
      const due = () => new Promise((resolve) => setTimeout(resolve, 5))
      await linker.link(OLIVIA, claims('olivia'), idp('s1'))
      await due()
      const [a, b] = await Promise.all([links.check(OLIVIA), other.check(OLIVIA)])
      assert.equal(calls, 1, 'one refresh for both uses, across replicas')
      // The use whose replica refreshed sees the new role; the other may have gone on with the link as it stood.
      assert.ok(a.ok && b.ok)
      assert.ok(
        [a.record.roles, b.record.roles].some((r) => r.join() === 'viewer'),
        JSON.stringify([a, b]),
      )
      await links.idle()
      await other.idle()
      const after = await other.check(OLIVIA)
      assert.ok(after.ok)
      assert.deepEqual(after.record.roles, ['viewer'], 'on every replica once it is done')
      assert.equal(calls, 1, 'not due again for a minute')

      answer = 'refused'
      await linker.link(OSCAR, claims('oscar'), idp('s2'))
      await due()
      assert.deepEqual(await links.check(OSCAR), { ok: false, reason: 'suspended' })
      assert.equal(calls, 2)
      assert.deepEqual(await other.check(OSCAR), { ok: false, reason: 'suspended' }, 'on every replica')
      // A refresh naming another person is refused as well.
      const third = { ...OSCAR, user: 'U0THIRD01' }
      await linker.link(third, claims('oscar'), idp('s3'))
      answer = { claims: claims('mallory'), tokens: {} }
      await due()
      assert.deepEqual(await links.check(third), { ok: false, reason: 'suspended' })
    })

    test('a use that cannot wait goes on with the link as it stands; an IdP that fails keeps it', async (t) => {
      const { writer } = await make(t)
      let release: (v: Awaited<ReturnType<IdpRefresher>>) => void = () => {}
      let failing = false
      const refresher: IdpRefresher = () =>
        failing
          ? Promise.reject(new Error('the IdP is down'))
          : new Promise((resolve) => {
              release = resolve
            })
      const outcomes: string[] = []
      const links = new ChatLinks(writer, {
        ttlMs: 60_000,
        refresher,
        refreshMs: 1,
        refreshLeaseMs: 1,
        onRefresh: (outcome) => outcomes.push(outcome),
      })
      await links.link(OLIVIA, claims('olivia'), idp('s1'))
      await new Promise((resolve) => setTimeout(resolve, 5))
      // It resolves while the refresh is still held (released below): it did not wait for it, however slow.
      const quick = await links.check(OLIVIA, 50)
      assert.ok(quick.ok)
      assert.deepEqual(quick.record.roles, ['operator'], 'the roles it had')
      release({ claims: claims('olivia', ['admin']), tokens: { refreshToken: 'rt3' } })
      await links.idle()
      failing = true
      await new Promise((resolve) => setTimeout(resolve, 5))
      const kept = await links.check(OLIVIA)
      assert.ok(kept.ok, 'an IdP that cannot answer is no verdict on the person')
      assert.deepEqual(kept.record.roles, ['admin'], 'the refreshed roles')
      assert.deepEqual(outcomes, ['updated', 'failed'])
    })
  })
}
