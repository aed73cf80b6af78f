import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SignJWT } from 'jose'
import { LinkTokens } from '../../src/identity/link-tokens.ts'
import { SHARED_REDIS } from '../cluster/redis-harness.ts'
import { chatLinkContract, memoryChatLinkPair, OLIVIA, redisChatLinkPair } from './chat-links-contract.ts'

chatLinkContract('memory', memoryChatLinkPair)
chatLinkContract('redis (two replicas)', redisChatLinkPair(SHARED_REDIS))

test('link tokens: signed and checked, refused when forged, expired, of another kind or another secret; every key of a rotation opens them', async () => {
  const tokens = new LinkTokens(['first-secret-for-link-tokens-0123456789'])
  const token = await tokens.sign({ ...OLIVIA, userName: 'o'.repeat(200), workspaceName: 'krg' })
  const link = await tokens.verify(token)
  assert.ok(typeof link === 'object')
  assert.deepEqual(
    [link.chat, link.workspace, link.user, link.userName?.length, link.workspaceName],
    ['slack', 'T0TEST001', 'U0OLIVIA1', 80, 'krg'],
  )
  assert.ok(link.expiresAt > Date.now() + 9 * 60_000 && link.expiresAt <= Date.now() + 10 * 60_000)
  assert.equal(await tokens.verify(`${token.slice(0, -3)}abc`), 'invalid')
  assert.equal(await tokens.verify('x'.repeat(3000)), 'invalid')
  assert.equal(await new LinkTokens(['another-secret-for-link-tokens-012345']).verify(token), 'invalid')
  // A rotation: the new secret first signs, the old one still opens.
  assert.ok(
    typeof (await new LinkTokens([
      'new-secret-for-link-tokens-0123456789',
      'first-secret-for-link-tokens-0123456789',
    ]).verify(token)) === 'object',
  )
  // A JWT under the same key that is not a link token.
  const { hkdfSync } = await import('node:crypto')
  const key = new Uint8Array(
    hkdfSync(
      'sha256',
      'first-secret-for-link-tokens-0123456789',
      'kasm-runtime-gateway',
      'chat-link token',
      32,
    ),
  )
  const sign = (
    header: Record<string, string>,
    claims: Record<string, unknown>,
    exp: number | string = '5m',
  ) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', ...header })
      .setAudience('krg:chat-link')
      .setJti('j')
      .setExpirationTime(exp)
      .sign(key)
  assert.equal(
    await tokens.verify(await sign({ typ: 'JWT' }, { chat: 'slack', ws: 'T0TEST001', u: 'U1' })),
    'invalid',
  )
  assert.equal(
    await tokens.verify(
      await sign({ typ: 'krg-chat-link+jwt' }, { chat: 'teams', ws: 'T0TEST001', u: 'U1' }),
    ),
    'invalid',
  )
  assert.equal(
    await tokens.verify(await sign({ typ: 'krg-chat-link+jwt' }, { chat: 'slack', ws: 't0', u: 'U1' })),
    'invalid',
  )
  assert.equal(
    await tokens.verify(
      await sign(
        { typ: 'krg-chat-link+jwt' },
        { chat: 'slack', ws: 'T0TEST001', u: 'U1' },
        Math.floor(Date.now() / 1000) - 60,
      ),
    ),
    'expired',
  )
})
