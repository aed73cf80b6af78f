import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pino from 'pino'
import { parseActivity } from '../../src/chat/msteams/activity.ts'
import { TeamsApiError } from '../../src/chat/msteams/api-error.ts'
import { TeamsBearerCheck, TeamsKeysUnavailable } from '../../src/chat/msteams/auth.ts'
import { retryAfterMs, TeamsConnectorClient } from '../../src/chat/msteams/connector.ts'
import { BotFrameworkOpenId } from '../../src/chat/msteams/openid.ts'
import { allowedServiceBase } from '../../src/chat/msteams/service-url.ts'
import { TeamsTokenError, TeamsTokens } from '../../src/chat/msteams/token.ts'
import {
  APP_ID,
  APP_PASSWORD,
  type BotFrameworkStandIn,
  channelConversationId,
  mentionActivity,
  OTHER_TENANT_ID,
  startBotFramework,
  TENANT_ID,
  teamsUser,
} from '../fixtures/bot-framework.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('the Microsoft Teams transport', () => {
  /**
   * The Teams transport on its own, against the Bot Framework stand-in: the inbound bearer check (each refusal
   * with the token that triggers it), the bot's own token, the connector's retries and the serviceUrl allowlist.
   */

  let bf: BotFrameworkStandIn
  const log = pino({ level: 'silent' })

  before(async () => {
    bf = await startBotFramework()
  })
  after(() => bf.close())

  const openId = () => new BotFrameworkOpenId({ url: bf.openIdUrl, timeoutMs: 10_000, production: false })
  const check = (cooldownMs?: number) =>
    new TeamsBearerCheck({
      appId: APP_ID,
      tenantId: TENANT_ID,
      openId: openId(),
      timeoutMs: 10_000,
      ...(cooldownMs === undefined ? {} : { cooldownMs }),
    })
  const tokens = () =>
    new TeamsTokens({
      loginUrl: bf.loginUrl,
      tenantId: TENANT_ID,
      appId: APP_ID,
      password: APP_PASSWORD,
      scope: async () => `${(await openId().get()).issuer}/.default`,
      timeoutMs: 10_000,
    })
  const connector = (retryForMs = 60_000) =>
    new TeamsConnectorClient({
      appId: APP_ID,
      tokens: tokens(),
      serviceUrls: [bf.serviceUrls],
      production: false,
      timeoutMs: 10_000,
      retryMs: 10,
      retryForMs,
      log,
    })

  test('a token signed by an endorsed key of the JWKS, for our app, tenant and serviceUrl, is taken', async () => {
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, teamsUser())
    const result = await check().verify(`Bearer ${await bf.sign(activity)}`)
    assert.ok(result.ok)
    const parsed = parseActivity(activity)
    assert.ok(parsed)
    assert.equal(check().matches(result.claims, parsed), undefined)
  })

  test('each refusal of the bearer check, with the token that triggers it', async () => {
    const c = check()
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, teamsUser())
    const refused = async (authorization: string | undefined) => {
      const r = await c.verify(authorization)
      return r.ok ? 'taken' : r.reason
    }
    assert.equal(await refused(undefined), 'missing')
    assert.equal(await refused('Basic abc'), 'missing')
    assert.equal(await refused('Bearer not.a.jwt'), 'malformed')
    assert.equal(await refused(`Bearer ${await bf.sign(activity, { key: 'foreign' })}`), 'signature')
    // A known kid with another key's signature.
    assert.equal(
      await refused(`Bearer ${await bf.sign(activity, { key: 'foreign', kid: 'bf-key-good' })}`),
      'signature',
    )
    assert.equal(await refused(`Bearer ${await bf.sign(activity, { audience: 'someone-else' })}`), 'audience')
    assert.equal(
      await refused(`Bearer ${await bf.sign(activity, { issuer: 'https://evil.example' })}`),
      'issuer',
    )
    assert.equal(await refused(`Bearer ${await bf.sign(activity, { expiresIn: -600 })}`), 'expired')
    assert.equal(await refused(`Bearer ${await bf.sign(activity, { key: 'unendorsed' })}`), 'endorsement')
    // Within the clock skew, a just-expired token is still taken.
    assert.equal(await refused(`Bearer ${await bf.sign(activity, { expiresIn: -60 })}`), 'taken')
  })

  test('the token must match its activity: serviceurl claim, tenant, channel', async () => {
    const c = check()
    const user = teamsUser()
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, user)
    const parsed = parseActivity(activity)
    assert.ok(parsed)
    const claimsOf = async (token: string) => {
      const r = await c.verify(`Bearer ${token}`)
      assert.ok(r.ok)
      return r.claims
    }
    const foreign = await claimsOf(await bf.sign(activity, { serviceUrl: 'https://evil.example/amer/' }))
    assert.equal(c.matches(foreign, parsed), 'service_url')
    const other = parseActivity(
      mentionActivity({ serviceUrl: bf.serviceUrl, tenantId: OTHER_TENANT_ID }, user),
    )
    assert.ok(other)
    assert.equal(c.matches(await claimsOf(await bf.sign(activity)), other), 'tenant')
    assert.equal(
      c.matches(await claimsOf(await bf.sign(activity)), { ...parsed, channelId: 'webchat' }),
      'channel',
    )
    const noTenant = { ...parsed, channelData: {}, conversation: { id: parsed.conversation.id } }
    assert.equal(c.matches(await claimsOf(await bf.sign(activity)), noTenant), 'tenant')
  })

  test('an unknown kid re-reads the JWKS (a rotated key is taken), at most once per cooldown', async () => {
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, teamsUser())
    const slow = check(10 * 60_000)
    assert.ok((await slow.verify(`Bearer ${await bf.sign(activity)}`)).ok)
    const reads = bf.jwksReads
    // Not yet published: refused, and a burst of such tokens does not read the JWKS again and again.
    for (let i = 0; i < 3; i++) {
      const r = await slow.verify(`Bearer ${await bf.sign(activity, { key: 'rotated' })}`)
      assert.equal(r.ok ? 'taken' : r.reason, 'signature')
    }
    assert.ok(bf.jwksReads - reads <= 1, `read ${bf.jwksReads - reads} times`)
    // No cooldown at all: a cooldown of 1 ms still holds within the millisecond the keys were read (jose compares
    // Date.now()), and a fast run got there within it.
    const quick = check(0)
    assert.ok((await quick.verify(`Bearer ${await bf.sign(activity)}`)).ok)
    bf.rotateIn()
    // Without a cooldown, an unknown kid makes the checker read the keys again and find it; the other checker,
    // still cooling down, does not read them yet.
    const rotated = await quick.verify(`Bearer ${await bf.sign(activity, { key: 'rotated' })}`)
    assert.ok(rotated.ok)
    const stillCooling = await slow.verify(`Bearer ${await bf.sign(activity, { key: 'rotated' })}`)
    assert.equal(stillCooling.ok ? 'taken' : stillCooling.reason, 'signature')
  })

  test('the bot token: fetched with client credentials and the scope, cached, one request in flight', async () => {
    const t = tokens()
    const before = bf.tokenRequests.length
    const [a, b, c] = await Promise.all([t.get(), t.get(), t.get()])
    assert.equal(a, b)
    assert.equal(b, c)
    assert.equal(await t.get(), a)
    assert.equal(bf.tokenRequests.length - before, 1)
    const form = bf.tokenRequests.at(-1)
    assert.deepEqual(
      { grant: form?.grant_type, id: form?.client_id, scope: form?.scope },
      { grant: 'client_credentials', id: APP_ID, scope: 'https://api.botframework.com/.default' },
    )
    t.invalidate(a)
    assert.notEqual(await t.get(), a)
  })

  test('the connector posts, updates and creates 1:1 conversations with the bot token', async () => {
    const client = connector()
    const conversation = channelConversationId()
    const { id } = await client.post(bf.serviceUrl, conversation, { type: 'message', text: 'hello' })
    assert.equal(bf.activities.get(id)?.activity.text, 'hello')
    await client.update(bf.serviceUrl, conversation, id, { type: 'message', text: 'updated' })
    assert.equal(bf.activities.get(id)?.activity.text, 'updated')
    assert.equal(bf.activities.get(id)?.updates, 1)
    const user = teamsUser()
    const personal = await client.createPersonal(bf.serviceUrl, TENANT_ID, user.id)
    assert.match(personal.id, /^a:personal-/)
    assert.deepEqual(bf.personal.at(-1)?.body.members, [{ id: user.id }])
    assert.deepEqual(bf.personal.at(-1)?.body.bot, { id: `28:${APP_ID}` })
  })

  test('a 429 is retried after its Retry-After, a 5xx with backoff; a 4xx is not retried', async () => {
    const client = connector()
    const conversation = channelConversationId()
    bf.failNext(1, 429, 1)
    const started = Date.now()
    const { id } = await client.post(bf.serviceUrl, conversation, { type: 'message', text: 'after 429' })
    assert.ok(Date.now() - started >= 1000, 'waited the Retry-After')
    assert.equal(bf.activities.get(id)?.activity.text, 'after 429')
    bf.failNext(2, 503)
    await client.post(bf.serviceUrl, conversation, { type: 'message', text: 'after 503' })
    assert.equal(bf.posted(conversation).length, 2)
    const calls = bf.calls.length
    await assert.rejects(
      client.update(bf.serviceUrl, conversation, 'no-such-activity', { type: 'message' }),
      {
        name: 'TeamsApiError',
        code: 'http_404',
        status: 404,
      },
    )
    assert.equal(bf.calls.length - calls, 1, 'a 404 is asked once')
    // Without retries (a click waits): the first 429 is the answer.
    bf.failNext(1, 429, 1)
    await assert.rejects(
      client.post(bf.serviceUrl, conversation, { type: 'message' }, { retry: false }),
      (err: unknown) => err instanceof TeamsApiError && err.status === 429,
    )
    // Past the retry budget, the failure is the answer.
    bf.failNext(100, 502)
    await assert.rejects(connector(200).post(bf.serviceUrl, conversation, { type: 'message' }), {
      code: 'http_502',
    })
    bf.clearFailures()
  })

  test('a connector 401 renews the token once; a failing token endpoint is retried like the connector', async () => {
    const client = connector()
    const conversation = channelConversationId()
    await client.post(bf.serviceUrl, conversation, { type: 'message', text: 'first' })
    const tokensBefore = bf.tokenRequests.length
    bf.revokeTokens()
    await client.post(bf.serviceUrl, conversation, { type: 'message', text: 'with a fresh token' })
    assert.equal(bf.tokenRequests.length - tokensBefore, 1)
    assert.deepEqual(
      bf.calls.slice(-2).map((c) => c.status),
      [401, 201],
    )
    // A fresh client (no token yet) whose token endpoint answers 503 twice, then gives one.
    bf.failTokens(2, 503)
    await connector().post(bf.serviceUrl, conversation, { type: 'message', text: 'after the token endpoint' })
    assert.equal(bf.posted(conversation).length, 3)
  })

  test('a redirect is not followed (the token would travel with it), an oversized answer is not read', async () => {
    const client = connector()
    const conversation = channelConversationId()
    const calls = bf.calls.length
    bf.misbehaveNext('redirect')
    await assert.rejects(client.post(bf.serviceUrl, conversation, { type: 'message' }), {
      code: 'http_307',
      status: 307,
    })
    assert.deepEqual(
      bf.calls.slice(calls).map((c) => c.status),
      [307],
      'asked once, the redirect not followed',
    )
    bf.misbehaveNext('oversized')
    await assert.rejects(client.post(bf.serviceUrl, conversation, { type: 'message' }), {
      code: 'bad_response',
    })
    assert.equal(bf.calls.length - calls, 2, 'an oversized answer is not asked again')
  })

  test("a refused bot token is a TeamsTokenError naming Entra's code, never its description", async () => {
    const wrong = new TeamsTokens({
      loginUrl: bf.loginUrl,
      tenantId: TENANT_ID,
      appId: APP_ID,
      password: 'not the password',
      scope: async () => 'https://api.botframework.com/.default',
      timeoutMs: 10_000,
    })
    await assert.rejects(wrong.get(), (err: unknown) => {
      assert.ok(err instanceof TeamsTokenError)
      assert.equal(err.status, 401)
      assert.equal(err.message, 'the token endpoint refused: invalid_client')
      return true
    })
    const unreachable = new TeamsTokens({
      loginUrl: 'http://127.0.0.1:9',
      tenantId: TENANT_ID,
      appId: APP_ID,
      password: APP_PASSWORD,
      scope: async () => 'https://api.botframework.com/.default',
      timeoutMs: 5000,
    })
    await assert.rejects(unreachable.get(), { name: 'TeamsTokenError', status: 0 })
  })

  test('keys that cannot be read are not a refusal of the sender: TeamsKeysUnavailable', async () => {
    const dead = new TeamsBearerCheck({
      appId: APP_ID,
      tenantId: TENANT_ID,
      openId: new BotFrameworkOpenId({
        url: 'http://127.0.0.1:9/v1/.well-known/openidconfiguration',
        timeoutMs: 5000,
        production: false,
      }),
      timeoutMs: 5000,
    })
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, teamsUser())
    await assert.rejects(dead.verify(`Bearer ${await bf.sign(activity)}`), TeamsKeysUnavailable)
    // Without a bearer at all it is refused before anything is read.
    assert.deepEqual(await dead.verify(undefined), { ok: false, reason: 'missing' })
  })

  test('the bot token never goes to a serviceUrl outside GATEWAY_TEAMS_SERVICE_URLS', async () => {
    const client = connector()
    const calls = bf.calls.length
    for (const bad of [
      'https://evil.example/amer/',
      `${bf.url}/emea/`,
      `${bf.url}/amer/../emea/`,
      `${bf.url.replace('127.0.0.1', 'user:pw@127.0.0.1')}/amer/`,
      `${bf.url}/amer/?x=1`,
      'javascript:alert(1)',
      'not a url',
    ])
      await assert.rejects(client.post(bad, channelConversationId(), { type: 'message' }), {
        code: 'service_url_refused',
      })
    assert.equal(bf.calls.length, calls)
    // Ids cannot climb out of the conversation either.
    await assert.rejects(client.update(bf.serviceUrl, 'x', '..', { type: 'message' }), { code: 'bad_id' })
  })

  test('allowedServiceBase: https prefixes, http only to loopback outside production', () => {
    const microsoft = ['https://smba.trafficmanager.net/', 'https://smba.infra.gov.teams.microsoft.us/']
    assert.ok(allowedServiceBase('https://smba.trafficmanager.net/amer/', microsoft, true))
    assert.ok(allowedServiceBase('https://SMBA.trafficmanager.net:443/emea', microsoft, true))
    assert.ok(allowedServiceBase('https://smba.infra.gov.teams.microsoft.us/gcch/', microsoft, true))
    assert.equal(
      allowedServiceBase('https://smba.trafficmanager.net.evil.example/amer/', microsoft, true),
      null,
    )
    assert.equal(allowedServiceBase('https://evil-smba.trafficmanager.net/amer/', microsoft, true), null)
    assert.equal(allowedServiceBase('http://smba.trafficmanager.net/amer/', microsoft, false), null)
    assert.equal(allowedServiceBase('https://smba.trafficmanager.net:8443/amer/', microsoft, true), null)
    assert.ok(allowedServiceBase('http://127.0.0.1:9/amer/', ['http://127.0.0.1:9/'], false))
    assert.equal(allowedServiceBase('http://127.0.0.1:9/amer/', ['http://127.0.0.1:9/'], true), null)
    assert.equal(allowedServiceBase('http://10.0.0.1:9/amer/', ['http://10.0.0.1:9/'], false), null)
  })

  test('Retry-After in seconds or as a date', () => {
    assert.equal(retryAfterMs('3'), 3000)
    assert.equal(retryAfterMs(undefined), undefined)
    assert.equal(retryAfterMs('soon'), undefined)
    const date = retryAfterMs(new Date(Date.now() + 5000).toUTCString()) ?? -1
    assert.ok(date > 3000 && date <= 5000)
  })
})
