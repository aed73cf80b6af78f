import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { PLATFORM_FAILURES_MAX } from '../../src/auth/address-failures.ts'
import { MAX_ACTIVITY_BYTES } from '../../src/routes/msteams.ts'
import {
  APP_ID,
  BOT,
  type BotFrameworkStandIn,
  channelConversationId,
  installActivity,
  invokeActivity,
  mentionActivity,
  OTHER_TENANT_ID,
  startBotFramework,
  TENANT_ID,
  teamsUser,
} from '../fixtures/bot-framework.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('the Microsoft Teams endpoint', () => {
  /**
   * The Teams bot's messaging endpoint on one gateway, against the Bot Framework stand-in: installations recorded
   * and listed for admins, a mention answered with the channel's notify-file entry, an invoke answered, and every
   * refusal of the issue (unsigned, wrongly signed, wrong audience, expired, other tenant, foreign serviceUrl, a
   * key not endorsed for msteams) answered 401 with nothing acted on. One gateway and one stand-in for the file.
   */

  let bf: BotFrameworkStandIn
  let gw: TestGateway
  let endpoint: string
  /** A server no bearer token may ever reach: a made-up serviceUrl points here. */
  let trap: http.Server
  let trapUrl: string
  const trapped: string[] = []

  before(async () => {
    bf = await startBotFramework()
    trap = http.createServer((req, res) => {
      trapped.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`)
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"trapped"}')
    })
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve))
    trapUrl = `http://127.0.0.1:${(trap.address() as AddressInfo).port}/amer/`
    gw = await startGateway(bf.env())
    endpoint = `${gw.url}${gw.app.config.basePath}teams/messages`
  })
  after(async () => {
    await gw?.close()
    await bf?.close()
    trap?.closeAllConnections()
    await new Promise((resolve) => trap?.close(resolve))
  })

  const admin = async () => bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const conversations = async (token?: string) => {
    const res = await fetch(`${gw.url}${gw.app.config.basePath}admin/msteams/conversations`, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    })
    return {
      status: res.status,
      json: (await res.json()) as { conversations?: Record<string, unknown>[]; error?: string },
    }
  }
  const metric = async (series: string): Promise<number> => {
    const text = await (await fetch(`${gw.url}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith(`${series} `))
    return line === undefined ? Number.NaN : Number(line.split(' ')[1])
  }

  test('the bot added to a team: the installation is recorded, listed for admins, and the bot says where it is', async () => {
    const conversationId = channelConversationId('install')
    const place = { serviceUrl: bf.serviceUrl, conversationId, teamName: 'Night shift' }
    const res = await bf.send(endpoint, installActivity(place, teamsUser()))
    assert.equal(res.status, 200)
    const { status, json } = await conversations(await admin())
    assert.equal(status, 200)
    const listed = json.conversations?.find((c) => c.conversationId === conversationId)
    assert.ok(listed, 'listed')
    assert.equal(listed.serviceUrl, bf.serviceUrl)
    assert.equal(listed.serviceUrlAllowed, true)
    assert.equal(listed.tenantId, TENANT_ID)
    assert.equal(listed.teamName, 'Night shift')
    assert.equal(
      listed.notifyEntry,
      `- msteams: { conversation: "${conversationId}", serviceUrl: "${bf.serviceUrl}" }`,
    )
    const welcome = await waitFor('the welcome message', () => bf.posted(conversationId)[0])
    assert.match(String(welcome.activity.text), /notify file/)
    assert.ok(String(welcome.activity.text).includes(String(listed.notifyEntry)))

    // Removed from the team: forgotten.
    const removed = {
      ...installActivity(place, teamsUser()),
      membersAdded: [],
      membersRemoved: [{ id: BOT.id }],
    }
    assert.equal((await bf.send(endpoint, removed)).status, 200)
    const again = await conversations(await admin())
    assert.equal(
      again.json.conversations?.find((c) => c.conversationId === conversationId),
      undefined,
    )
  })

  test('a mention of the bot in a channel is answered, in its thread, with the channel’s notify-file entry', async () => {
    const channel = channelConversationId('mention')
    const thread = `${channel};messageid=1712345678901`
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: thread }, teamsUser())
    assert.equal((await bf.send(endpoint, activity)).status, 200)
    const reply = await waitFor('the reply', () => bf.posted(thread)[0])
    assert.equal(reply.activity.textFormat, 'plain')
    assert.equal(reply.activity.replyToId, activity.id)
    assert.ok(
      String(reply.activity.text).endsWith(
        `- msteams: { conversation: "${channel}", serviceUrl: "${bf.serviceUrl}" }`,
      ),
      String(reply.activity.text),
    )
    // Teams delivering the same activity again: one reply.
    assert.equal((await bf.send(endpoint, activity)).status, 200)
    // A message without a mention, and one in a 1:1 chat: nothing.
    const plain = {
      ...mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: channel }, teamsUser()),
      entities: [],
    }
    assert.equal((await bf.send(endpoint, plain)).status, 200)
    const marker = mentionActivity(
      { serviceUrl: bf.serviceUrl, conversationId: thread },
      teamsUser(),
      'again',
    )
    assert.equal((await bf.send(endpoint, marker)).status, 200)
    await waitFor('the second mention answered', () => bf.posted(thread).length >= 2)
    assert.equal(bf.posted(thread).length, 2, 'the repeated activity was not answered twice')
    assert.equal(bf.posted(channel).length, 0)
  })

  test('an adaptiveCard/action invoke is answered with a card (no adapter yet: "answer in the console")', async () => {
    const place = { serviceUrl: bf.serviceUrl, conversationId: channelConversationId() }
    const res = await bf.send(
      endpoint,
      invokeActivity(place, teamsUser(), { verb: 'krg.answer', data: { a: 1 } }),
    )
    assert.equal(res.status, 200)
    const body = res.json as { statusCode: number; type: string; value: { type: string; body: unknown[] } }
    assert.equal(body.statusCode, 200)
    assert.equal(body.type, 'application/vnd.microsoft.card.adaptive')
    assert.equal(body.value.type, 'AdaptiveCard')
    // Another invoke: not implemented.
    const other = { ...invokeActivity(place, teamsUser(), { verb: 'x' }), name: 'composeExtension/query' }
    assert.equal((await bf.send(endpoint, other)).status, 501)
  })

  test('every refusal: 401 msteams_unauthorized, and nothing is recorded, posted or answered', async () => {
    const before = {
      calls: bf.calls.length,
      refused: await metric('krg_msteams_activities_total{type="unverified",outcome="unauthorized"}'),
    }
    const refusals: [string, Record<string, unknown>, Parameters<BotFrameworkStandIn['send']>[2]][] = []
    const make = (name: string, options: Parameters<BotFrameworkStandIn['send']>[2], tenantId?: string) => {
      const conversationId = channelConversationId(`refused-${refusals.length}`)
      const place = {
        serviceUrl: bf.serviceUrl,
        conversationId,
        ...(tenantId === undefined ? {} : { tenantId }),
      }
      refusals.push([name, installActivity(place, teamsUser()), options])
    }
    make('unsigned', { authorization: null })
    make('not a bearer', { authorization: 'Basic Ym90OnNlY3JldA==' })
    make('garbage token', { authorization: 'Bearer abc.def.ghi' })
    make('wrongly signed (a key not in the JWKS)', { key: 'foreign' })
    make('wrongly signed (a known kid, another key)', { key: 'foreign', kid: 'bf-key-good' })
    make('wrong audience', { audience: '00000000-0000-4000-8000-000000000000' })
    make('wrong issuer', { issuer: 'https://login.microsoftonline.com/evil/v2.0' })
    make('expired', { expiresIn: -3600 })
    make('a key not endorsed for msteams', { key: 'unendorsed' })
    make('other tenant', {}, OTHER_TENANT_ID)
    make('foreign serviceUrl (not the token’s)', { serviceUrl: 'https://smba.trafficmanager.net/amer/' })
    for (const [name, activity, options] of refusals) {
      const res = await bf.send(endpoint, activity, options)
      assert.equal(res.status, 401, name)
      assert.equal((res.json as { error: string }).error, 'msteams_unauthorized', name)
    }
    // The activity's serviceUrl made up (and the token signed for it): taken, but the token never goes there.
    const madeUp = mentionActivity(
      { serviceUrl: trapUrl, conversationId: channelConversationId('trap') },
      teamsUser(),
    )
    assert.equal((await bf.send(endpoint, madeUp)).status, 200)
    const install = installActivity(
      { serviceUrl: trapUrl, conversationId: channelConversationId('trap2') },
      teamsUser(),
    )
    assert.equal((await bf.send(endpoint, install)).status, 200)
    // A marker after them: once its reply is posted, anything the earlier ones caused would have been too.
    const marker = channelConversationId('marker')
    await bf.send(
      endpoint,
      mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: marker }, teamsUser()),
    )
    await waitFor('the marker answered', () => bf.posted(marker)[0])
    assert.deepEqual(trapped, [], 'no request reached a made-up serviceUrl')
    assert.equal(bf.calls.length - before.calls, 1, 'only the marker was answered')
    const listed = (await conversations(await admin())).json.conversations ?? []
    for (const [name, activity] of refusals)
      assert.equal(
        listed.find((c) => c.conversationId === (activity.conversation as { id: string }).id),
        undefined,
        `${name}: not recorded`,
      )
    // The made-up serviceUrl's installation is listed as one the bot cannot post to.
    const trapInstall = listed.find((c) => c.conversationId === (install.conversation as { id: string }).id)
    assert.equal(trapInstall?.serviceUrlAllowed, false)
    assert.equal(
      await metric('krg_msteams_activities_total{type="unverified",outcome="unauthorized"}'),
      before.refused + refusals.length,
    )
  })

  test('the body is bounded, and a signed body that is no activity is refused', async () => {
    const activity = mentionActivity({ serviceUrl: bf.serviceUrl }, teamsUser())
    const big = JSON.stringify({ ...activity, text: 'x'.repeat(MAX_ACTIVITY_BYTES) })
    const tooBig = await bf.send(endpoint, activity, { body: big })
    assert.equal(tooBig.status, 413)
    // Unsigned and too big: refused before the body is read.
    assert.equal((await bf.send(endpoint, activity, { body: big, authorization: null })).status, 401)
    const notActivity = await bf.send(endpoint, activity, { body: JSON.stringify({ hello: 'world' }) })
    assert.equal(notActivity.status, 400)
    assert.equal((notActivity.json as { error: string }).error, 'bad_request')
  })

  test('the installations list is for admins only', async () => {
    assert.equal((await conversations()).status, 401)
    const operator = await bearer({ sub: 'olivia', roles: ['operator'], teams: ['blue'] })
    assert.equal((await conversations(operator)).status, 403)
  })

  test('the bot fetched its own token for the connector with client credentials', () => {
    const form = bf.tokenRequests.at(-1)
    assert.equal(form?.client_id, APP_ID)
    assert.equal(form?.scope, 'https://api.botframework.com/.default')
    assert.ok(bf.calls.every((c) => c.token?.startsWith('bf-token-')))
  })

  // Last in the file: it takes this address past the limit of refusals (the ones above count too).
  test('refusals from one address are answered 429 past the limit, and an activity the Bot Framework signed is still served', async () => {
    const refusedSeries = 'krg_msteams_activities_total{type="unverified",outcome="unauthorized"}'
    const limitedSeries = 'krg_msteams_activities_total{type="unverified",outcome="rate_limited"}'
    assert.equal(await metric(limitedSeries), 0)
    const place = { serviceUrl: bf.serviceUrl, conversationId: channelConversationId('limited') }
    const unsigned = () => bf.send(endpoint, installActivity(place, teamsUser()), { authorization: null })
    const statuses: number[] = []
    for (let n = await metric(refusedSeries); n < PLATFORM_FAILURES_MAX; n++)
      statuses.push((await unsigned()).status)
    assert.deepEqual(new Set(statuses), new Set([401]), 'up to the limit, each one is refused as unsigned')
    const limited = await unsigned()
    assert.equal(limited.status, 429)
    assert.equal((limited.json as { error: string }).error, 'msteams_unauthorized_rate_limited')
    const wait = Number(limited.headers.get('retry-after'))
    assert.ok(wait > 0 && wait <= 300, `Retry-After ${wait}`)
    // Signed, but not matching its token (the check after the body is read): limited too.
    const mismatched = await bf.send(endpoint, installActivity(place, teamsUser()), {
      serviceUrl: 'https://smba.trafficmanager.net/amer/',
    })
    assert.equal(mismatched.status, 429)
    // Microsoft's addresses send every bot's activities: one signed for this bot is still served.
    const thread = `${channelConversationId('limited')};messageid=7`
    const mention = mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: thread }, teamsUser())
    const valid = await bf.send(endpoint, mention)
    assert.equal(valid.status, 200, valid.text)
    await waitFor('the mention answered', () => bf.posted(thread)[0])
    assert.equal(await metric(limitedSeries), 2)
    assert.equal(await metric(refusedSeries), PLATFORM_FAILURES_MAX)
    const listed = (await conversations(await admin())).json.conversations ?? []
    assert.equal(
      listed.find((c) => c.conversationId === place.conversationId),
      undefined,
      'nothing recorded',
    )
  })
})
