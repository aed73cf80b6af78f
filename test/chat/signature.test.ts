import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkSlackSignature } from '../../src/chat/slack/signature.ts'
import { slackSignature } from '../fixtures/slack-api.ts'

/** Slack's `v0` request signature, with Slack's own documented example and every way to fail it. */

const SECRET = '8f742231b10e8888abcd99yyyzzz85a5'

test("Slack's documented example verifies", () => {
  // https://docs.slack.dev/authentication/verifying-requests-from-slack (the slash command example)
  const body =
    'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c'
  assert.equal(
    checkSlackSignature({
      secret: SECRET,
      timestamp: '1531420618',
      signature: 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503',
      body: Buffer.from(body),
      nowS: 1531420618,
    }),
    undefined,
  )
})

test('every refusal: missing, malformed, stale either way, another secret, another body', () => {
  const now = 1_700_000_000
  const body = 'payload=%7B%7D'
  const good = slackSignature(SECRET, now, body)
  const check = (over: Partial<Parameters<typeof checkSlackSignature>[0]>) =>
    checkSlackSignature({
      secret: SECRET,
      timestamp: String(now),
      signature: good,
      body: Buffer.from(body),
      nowS: now,
      ...over,
    })
  assert.equal(check({}), undefined)
  assert.equal(check({ signature: undefined }), 'missing')
  assert.equal(check({ timestamp: undefined }), 'missing')
  assert.equal(check({ timestamp: '17e8' }), 'malformed')
  assert.equal(check({ timestamp: '-1' }), 'malformed')
  assert.equal(check({ signature: good.toUpperCase() }), 'malformed')
  assert.equal(check({ signature: `v1=${good.slice(3)}` }), 'malformed')
  assert.equal(check({ signature: good.slice(0, -2) }), 'malformed')
  // Five minutes either way is accepted, a second more is not (before any HMAC).
  assert.equal(check({ nowS: now + 300, signature: slackSignature(SECRET, now, body) }), undefined)
  assert.equal(check({ nowS: now + 301 }), 'stale')
  assert.equal(check({ nowS: now - 301 }), 'stale')
  assert.equal(check({ secret: `${SECRET}x` }), 'mismatch')
  assert.equal(check({ body: Buffer.from(`${body} `) }), 'mismatch')
  assert.equal(check({ timestamp: String(now + 1), nowS: now }), 'mismatch', 'the timestamp is signed too')
})
