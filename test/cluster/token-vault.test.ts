import assert from 'node:assert/strict'
import { test } from 'node:test'
import { base64url, CompactEncrypt, calculateJwkThumbprint } from 'jose'
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
  // The kid is the key's RFC 7638 thumbprint: a one-way hash, nothing of the key itself.
  const kid = await calculateJwkThumbprint({ kty: 'oct', k: KEY })
  assert.deepEqual(header, { alg: 'dir', enc: 'A256GCM', kid, sid: 's1' })
  assert.ok(!kid.includes(KEY.slice(0, 8)))
  assert.equal(await vault.sealingKid(), kid)
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

const NEW = 'TmV3LXJvdGF0aW9uLWtleS0zMi1ieXRlcy1sb25nISE'

/** A record as 0.1.0 sealed it: no kid in the header. */
async function legacySeal(key: string, kasmId: string, token: string): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(token))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', sid: kasmId })
    .encrypt(base64url.decode(key))
}

test('rotation: the first key seals, every key opens, and unseal says which records are on an old key', async () => {
  const before = TokenVault.fromBase64url(KEY)
  const during = TokenVault.fromBase64url(`${NEW},${KEY}`)
  const after = TokenVault.fromBase64url([NEW])
  const old = await before.seal('s1', new Secret(TOKEN))

  const opened = await during.unseal('s1', old)
  assert.equal(opened.secret.reveal(), TOKEN)
  assert.equal(opened.kid, await before.sealingKid())
  assert.equal(opened.current, false, 'sealed with the second key: due for a re-seal')
  const resealed = await during.seal('s1', opened.secret)
  assert.equal((await during.unseal('s1', resealed)).current, true)
  assert.deepEqual(await during.kids(), [await after.sealingKid(), await before.sealingKid()])

  // The new key's records open on a replica that only has the new key, not on one that only has the old.
  assert.equal((await after.open('s1', resealed)).reveal(), TOKEN)
  await assert.rejects(before.open('s1', resealed), (err: TokenVaultError) => err.reason === 'unknown_key')
  await assert.rejects(after.open('s1', old), (err: TokenVaultError) => err.reason === 'unknown_key')
})

test('a 0.1.0 record (no kid) opens with the keys in order and counts as on an old key', async () => {
  const legacy = await legacySeal(KEY, 's1', TOKEN)
  const opened = await TokenVault.fromBase64url([NEW, KEY]).unseal('s1', legacy)
  assert.equal(opened.secret.reveal(), TOKEN)
  assert.equal(opened.kid, null)
  assert.equal(opened.current, false)
  await assert.rejects(
    TokenVault.fromBase64url([NEW]).unseal('s1', legacy),
    (err: TokenVaultError) => err.reason === 'undecryptable',
  )
})

test('a record whose kid was rewritten, or whose bytes changed, is refused with its reason', async () => {
  const vault = TokenVault.fromBase64url([NEW, KEY])
  const jwe = await vault.seal('s1', new Secret(TOKEN))
  const [head, ...rest] = jwe.split('.')
  const header = JSON.parse(Buffer.from(head ?? '', 'base64url').toString()) as Record<string, string>
  const rewrite = (changes: Record<string, string>) =>
    [Buffer.from(JSON.stringify({ ...header, ...changes })).toString('base64url'), ...rest].join('.')
  // Pointing the record at the other configured key: the header is authenticated, so it does not open.
  const otherKid = (await vault.kids())[1] as string
  await assert.rejects(vault.unseal('s1', rewrite({ kid: otherKid })), (err: TokenVaultError) => {
    return err.reason === 'undecryptable'
  })
  await assert.rejects(vault.unseal('s1', rewrite({ kid: 'no-such-key' })), (err: TokenVaultError) => {
    return err.reason === 'unknown_key' && err.message.includes('no-such-key')
  })
  await assert.rejects(vault.unseal('s2', jwe), (err: TokenVaultError) => err.reason === 'wrong_session')
  await assert.rejects(vault.unseal('s1', 'garbage'), (err: TokenVaultError) => err.reason === 'malformed')
})

test('a key listed twice, or an empty list, is refused', () => {
  assert.throws(() => TokenVault.fromBase64url(`${KEY},${KEY}`), /listed twice/)
  assert.throws(() => new TokenVault([]), TokenVaultError)
  assert.throws(() => TokenVault.fromBase64url(`${KEY},short`), /encryption key 2 must be 32 bytes/)
})
