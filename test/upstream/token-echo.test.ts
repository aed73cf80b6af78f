import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { text } from 'node:stream/consumers'
import { test } from 'node:test'
import { Secret } from '../../src/sessions/secret.ts'
import { TokenEcho, tokenEcho } from '../../src/upstream/token-echo.ts'

const TOKEN = 'tok/en"with\\quotes-0123456789'

async function masked(chunks: string[], token = TOKEN): Promise<{ out: string; echoes: number }> {
  let echoes = 0
  const out = await text(
    Readable.from(chunks.map((c) => Buffer.from(c))).pipe(new TokenEcho(token).masker(() => echoes++)),
  )
  return { out, echoes }
}

test('the body mask finds the token however the chunks split it, and keeps the length', async () => {
  const body = `{"a":"${'x'.repeat(40)}","echo":"${TOKEN}","tail":"${'y'.repeat(40)}"} ${TOKEN}`
  for (let cut = 0; cut <= body.length; cut++) {
    for (const second of [cut, Math.min(body.length, cut + 7)]) {
      const { out, echoes } = await masked([body.slice(0, cut), body.slice(cut, second), body.slice(second)])
      assert.equal(out.length, body.length)
      assert.ok(!out.includes(TOKEN), `cut at ${cut}/${second}`)
      assert.equal(echoes, 2, `cut at ${cut}/${second}`)
    }
  }
})

test('JSON-escaped spellings of the token are masked too; the JSON stays valid', async () => {
  const escaped = JSON.stringify(TOKEN).slice(1, -1)
  const json = `{"said":"${escaped}","slashed":"${escaped.replaceAll('/', '\\/')}"}`
  const { out, echoes } = await masked([json])
  assert.equal(echoes, 2)
  assert.deepEqual(Object.keys(JSON.parse(out)), ['said', 'slashed'])
  assert.ok(!JSON.parse(out).said.includes('tok'))
})

test('a body without the token passes byte for byte, in the same chunks', async () => {
  const chunks = ['{"a":', '"tok/en is not it"', '}']
  const { out, echoes } = await masked(chunks)
  assert.equal(out, chunks.join(''))
  assert.equal(echoes, 0)
})

test('headers: the token or any 8-character piece of it is found, other values are not', () => {
  const echo = tokenEcho(new Secret('0123456789abcdefghij'))
  assert.equal(echo.inHeader('x 0123456789abcdefghij y'), true)
  assert.equal(echo.inHeader('prefix-9abcdefg-suffix'), true)
  assert.equal(echo.inHeader('89abcde'), false)
  assert.equal(echo.inHeader('W/"deadbeef"'), false)
  assert.equal(tokenEcho(new Secret('short')).inHeader('a short one'), true)
})

test('headers: a piece is found at every place of any value, as a substring search would', () => {
  const token = '0123456789abcdefghij'
  const echo = tokenEcho(new Secret(token))
  const pieces = new Set<string>()
  for (let i = 0; i + 8 <= token.length; i++) pieces.add(token.slice(i, i + 8))
  const bySearch = (value: string): boolean => [...pieces].some((p) => value.includes(p))
  // Deterministic values: pieces at the start, the end and inside, near misses, non-Latin-1 characters.
  const fillers = [
    '',
    'x',
    'W/"',
    '€',
    '\u{1F600}',
    'abcdefgh',
    '0123456',
    '789abcdef'.split('').reverse().join(''),
  ]
  let checked = 0
  for (const before of fillers)
    for (const after of fillers) {
      for (const piece of pieces) {
        assert.equal(echo.inHeader(`${before}${piece}${after}`), true, `${before}|${piece}|${after}`)
        const missed = `${piece.slice(0, 7)}_${piece.slice(7)}`
        const value = `${before}${missed}${after}`
        assert.equal(echo.inHeader(value), bySearch(value), value)
        checked += 2
      }
    }
  assert.ok(checked > 1000)
})

test('events: text masking counts every echo', () => {
  const echo = new TokenEcho(TOKEN)
  const { text: out, echoes } = echo.maskText(`${TOKEN} and ${TOKEN}`)
  assert.equal(echoes, 2)
  assert.equal(out, `${'*'.repeat(TOKEN.length)} and ${'*'.repeat(TOKEN.length)}`)
})
