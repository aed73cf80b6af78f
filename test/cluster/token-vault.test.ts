import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Secret } from '../../src/sessions/secret.ts'
import { TokenVault, TokenVaultError } from '../../src/sessions/token-vault.ts'

const KEY = 'Q2x1c3Rlci10ZXN0LWtleS0zMi1ieXRlcy1sb25nISE'
const OTHER = 'T3RoZXItdGVzdC1rZXktMzItYnl0ZXMtbG9uZy4uLi4'
const TOKEN = 'the-messaging-token-0123456789'

test('a sealed token is a compact JWE (dir, A256GCM) that shows nothing of the token', async () => {
  const vault = TokenVault.fromBase64url(KEY)
  const jwe = await vault.seal('s1', new Secret(TOKEN))
  const parts = jwe.split('.')
  assert.equal(parts.length, 5)
  assert.equal(parts[1], '', 'dir: no encrypted key')
  const header = JSON.parse(Buffer.from(parts[0] ?? '', 'base64url').toString()) as Record<string, string>
  assert.deepEqual(header, { alg: 'dir', enc: 'A256GCM', sid: 's1' })
  for (const needle of [
    TOKEN,
    Buffer.from(TOKEN).toString('base64url'),
    Buffer.from(TOKEN).toString('base64'),
  ]) {
    assert.ok(!jwe.includes(needle.slice(0, 12)), 'no token fragment in the ciphertext')
  }
  assert.notEqual(await vault.seal('s1', new Secret(TOKEN)), jwe, 'a fresh IV every time')
  const opened = await vault.open('s1', jwe)
  assert.ok(opened instanceof Secret)
  assert.equal(opened.reveal(), TOKEN)
})

test('a wrong key, another session, or a changed byte fails to open', async () => {
  const vault = TokenVault.fromBase64url(KEY)
  const jwe = await vault.seal('s1', new Secret(TOKEN))
  await assert.rejects(TokenVault.fromBase64url(OTHER).open('s1', jwe), TokenVaultError)
  await assert.rejects(vault.open('s2', jwe), /another session/)
  const parts = jwe.split('.')
  const cipher = Buffer.from(parts[3] ?? '', 'base64url')
  cipher[0] = (cipher[0] ?? 0) ^ 1
  parts[3] = cipher.toString('base64url')
  await assert.rejects(vault.open('s1', parts.join('.')), TokenVaultError)
  // A header rewritten to name another session breaks the authentication tag.
  const forged = Buffer.from(JSON.stringify({ alg: 'dir', enc: 'A256GCM', sid: 's2' })).toString('base64url')
  await assert.rejects(vault.open('s2', [forged, ...jwe.split('.').slice(1)].join('.')), TokenVaultError)
  await assert.rejects(vault.open('s1', 'not-a-jwe'), TokenVaultError)
})

test('the key must be 32 bytes of base64url', () => {
  assert.throws(() => TokenVault.fromBase64url('too-short'), TokenVaultError)
  assert.throws(() => TokenVault.fromBase64url(`${KEY.slice(0, 42)}+`), TokenVaultError)
  assert.throws(() => new TokenVault(new Uint8Array(16)), TokenVaultError)
})
