import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startDemoIdp } from '../../src/dev/demo-idp.ts'
import { SIGNATURE_FAILURES_MAX } from '../../src/routes/slack.ts'
import {
  click,
  codeIn,
  link,
  linkFor,
  messageAbout,
  OLIVIA,
  OSCAR,
  openLink,
  startSlackStack,
} from '../chat/helpers.ts'
import {
  channelConversationId,
  installActivity,
  invokeActivity,
  startBotFramework,
  teamsUser,
} from '../fixtures/bot-framework.ts'
import { postInteraction, WORKSPACE } from '../fixtures/slack-api.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { PASSWORD } from '../signin/harness.ts'
import { Conformance } from './conformance.ts'

/**
 * The Slack app's routes answer what their schemas declare (conformance.ts), on real gateways with Slack's
 * stand-in and the demo's real OpenID provider: the Request URL's acknowledgements and refusals, the linking
 * pages (with the code sent in Slack, and with Sign in with Slack, a second OpenID provider standing in for
 * slack.com), and the linked accounts' API.
 */

const conformance = new Conformance()
const onRoute = conformance.hook()

test('the Request URL, the linking by a code and the linked accounts answer what they declare', async (t) => {
  const stack = await startSlackStack(t, { app: { onRoute } })
  const statuses: Record<string, number> = {}

  // Linking Olivia: the link (to the IdP), the confirmation page, the code sent, a wrong code, the right one.
  const { browser, page } = await openLink((await linkFor(stack)).url, 'olivia')
  statuses['confirm page'] = page.status
  const before = stack.slack.posts(OLIVIA.id).length
  const asked = await browser.submit(page, 'auth/slack-link/confirm')
  assert.ok(browser.visited.includes(`${stack.base}auth/slack-link/confirm`))
  statuses['code asked'] = asked.status
  const dm = await waitFor('the code', () => stack.slack.posts(OLIVIA.id)[before])
  const wrong = await browser.submit(asked, 'auth/slack-link/code', { code: '00000000' })
  statuses['wrong code'] = wrong.status
  assert.match(wrong.text, /chat_link_code_wrong/)
  const linked = await browser.submit(wrong, 'auth/slack-link/code', { code: codeIn(dm) })
  statuses['right code'] = linked.status
  assert.match(linked.text, /Your Slack account is connected/)

  // The modal: opened by a click (a bare acknowledgement), its field errors, sent (cleared), then closed.
  stack.rt.ask({
    title: 'Which code?',
    fields: [{ id: 'code', type: 'string', pattern: '^[A-Z]{3}$', required: true, label: 'Code' }],
  })
  const opened = await click(stack, OLIVIA, await messageAbout(stack, 'Which code?'), 'krg:answer')
  assert.equal(opened.text, '')
  await waitFor('views.open', () => stack.slack.of('views.open').length === 1)
  const submit = (value: string) =>
    postInteraction(
      stack.interactions,
      stack.slack.submit(OLIVIA, { 'f:code': { v: { type: 'plain_text_input', value } } }),
    )
  const invalid = await submit('abc')
  assert.deepEqual(invalid.json, {
    response_action: 'errors',
    errors: { 'f:code': 'does not match ^[A-Z]{3}$' },
  })
  assert.deepEqual((await submit('ABC')).json, { response_action: 'clear' })
  const closed = await submit('XYZ')
  assert.equal((closed.json as { response_action?: string }).response_action, 'update', closed.text)

  // The linked accounts: hers, an admin's view, removed by her; Oscar's, removed by an admin.
  const olivia = await bearer({ sub: 'olivia', roles: ['operator'], teams: ['blue', 'red'] })
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['blue'] })
  const api = async (method: string, path: string, token: string) => {
    const res = await fetch(`${stack.base}${path}`, { method, headers: { authorization: `Bearer ${token}` } })
    const text = await res.text()
    return { status: res.status, json: text === '' ? null : (JSON.parse(text) as { links?: unknown[] }) }
  }
  const mine = await api('GET', 'api/chat-links', olivia)
  assert.equal(mine.json?.links?.length, 1)
  statuses['my links'] = mine.status
  const all = await api('GET', 'admin/chat-links', admin)
  assert.equal(all.json?.links?.length, 1)
  statuses['all links'] = all.status
  const key = (user = OLIVIA) => `slack/${WORKSPACE.id}/${user.id}`
  statuses.unlink = (await api('DELETE', `api/chat-links/${key()}`, olivia)).status
  statuses['unlink again'] = (await api('DELETE', `api/chat-links/${key()}`, olivia)).status
  const title = 'Another question'
  stack.rt.ask({ title, fields: [{ id: 'b', type: 'string', required: true, enum: ['chrome', 'firefox'] }] })
  await link(stack, OSCAR, await messageAbout(stack, title), 'oscar', 'krg:choose:0')
  statuses['admin unlink'] = (await api('DELETE', `admin/chat-links/${key(OSCAR)}`, admin)).status

  // Forged signatures: refused, then, past the limit, answered 429.
  const forge = () =>
    postInteraction(stack.interactions, { type: 'view_closed' }, { secret: 'not-the-secret' })
  statuses.forged = (await forge()).status
  for (let n = 1; n < SIGNATURE_FAILURES_MAX; n++) await forge()
  const limited = await forge()
  statuses['forged past the limit'] = limited.status
  assert.equal((limited.json as { error: string }).error, 'slack_signature_rate_limited')

  assert.deepEqual(statuses, {
    'confirm page': 200,
    'code asked': 200,
    'wrong code': 400,
    'right code': 200,
    'my links': 200,
    'all links': 200,
    unlink: 204,
    'unlink again': 404,
    'admin unlink': 204,
    forged: 401,
    'forged past the limit': 429,
  })
  assert.deepEqual(conformance.violations, [])
  for (const answer of [
    'POST /slack/interactions 200',
    'GET /admin/chat-links 200',
    'POST /slack/interactions 429',
  ])
    assert.ok(conformance.json.has(answer), answer)
})

test('Sign in with Slack (a second OpenID provider standing in for slack.com) answers what it declares', async (t) => {
  const slackIdp = await startDemoIdp({
    password: PASSWORD,
    people: [
      {
        sub: OLIVIA.id,
        username: 'olivia-in-slack',
        name: 'olivia',
        email: 'olivia@slack.invalid',
        extraClaims: { 'https://slack.com/team_id': WORKSPACE.id, 'https://slack.com/user_id': OLIVIA.id },
      },
    ],
  })
  t.after(() => slackIdp.close())
  const client = { id: '1234.5678', secret: 'slackclientsecretfortests01' }
  const stack = await startSlackStack(t, {
    env: {
      GATEWAY_SLACK_CLIENT_ID: client.id,
      GATEWAY_SLACK_CLIENT_SECRET: client.secret,
      GATEWAY_SLACK_OIDC_ISSUER: slackIdp.issuer,
    },
    app: { onRoute },
  })
  slackIdp.setClient({
    clientId: client.id,
    clientSecret: client.secret,
    redirectUris: [`${stack.base}auth/slack-link/slack-callback`],
    postLogoutRedirectUris: [],
  })
  const { browser } = await openLink((await linkFor(stack)).url, 'olivia')
  let page = await browser.navigate(`${stack.base}auth/slack-link/slack`)
  if (page.text.includes('/login"'))
    page = await browser.submit(page, '/login', { username: 'olivia-in-slack', password: PASSWORD })
  if (page.text.includes('/consent"')) page = await browser.submit(page, '/consent')
  assert.equal(page.status, 200, page.text)
  assert.match(page.text, /Your Slack account is connected/)
  assert.ok(browser.visited.some((url) => url.startsWith(`${stack.base}auth/slack-link/slack-callback`)))
  // Slack named the user: the link's optional names are listed too.
  const olivia = await bearer({ sub: 'olivia', roles: ['operator'], teams: ['blue', 'red'] })
  const res = await fetch(`${stack.base}api/chat-links`, { headers: { authorization: `Bearer ${olivia}` } })
  const { links } = (await res.json()) as { links: { userName?: string }[] }
  assert.deepEqual(
    links.map((l) => l.userName),
    ['olivia'],
  )
  assert.deepEqual(conformance.violations, [])
})

test('the Teams messaging endpoint and the installations list answer what they declare', async (t) => {
  const bf = await startBotFramework()
  t.after(() => bf.close())
  const app = await buildApp(loadConfig(testEnv(bf.env())), { onRoute })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${app.config.basePath}`
  const conversationId = channelConversationId('conformance')
  const place = { serviceUrl: bf.serviceUrl, conversationId }
  const statuses: Record<string, number> = {}
  statuses.installed = (await bf.send(`${url}teams/messages`, installActivity(place, teamsUser()))).status
  const invoke = await bf.send(`${url}teams/messages`, invokeActivity(place, teamsUser(), { verb: 'x' }))
  statuses.invoke = invoke.status
  statuses.unsigned = (
    await bf.send(`${url}teams/messages`, installActivity(place, teamsUser()), { authorization: null })
  ).status
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const listed = await fetch(`${url}admin/msteams/conversations`, {
    headers: { authorization: `Bearer ${admin}` },
  })
  statuses.listed = listed.status
  assert.equal(((await listed.json()) as { conversations: unknown[] }).conversations.length, 1)
  assert.deepEqual(statuses, { installed: 200, invoke: 200, unsigned: 401, listed: 200 })
  assert.deepEqual(conformance.violations, [])
})

test("this file's gateways gave every answer it is responsible for", () => {
  conformance.assertConformant('chat')
})
