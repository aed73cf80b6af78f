import assert from 'node:assert/strict'
import { hkdfSync, randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { SignJWT } from 'jose'
import { startDemoIdp } from '../../src/dev/demo-idp.ts'
import { postInteraction } from '../fixtures/slack-api.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { Browser, PASSWORD, sessionCookie, signInAt } from '../signin/harness.ts'
import {
  click,
  codeIn,
  confirmWithCode,
  ephemeralAfter,
  link,
  linkFor,
  linkIn,
  messageAbout,
  OLIVIA,
  OSCAR,
  openLink,
  repliesSent,
  type SlackStack,
  startSlackStack,
  VICTOR,
} from './helpers.ts'

/**
 * Linking a Slack account to a person: the signed link, the sign-in at the IdP, the confirmation page and,
 * with GATEWAY_SLACK_CLIENT_ID/_SECRET, Sign in with Slack (a second real OpenID provider standing in for
 * slack.com) in the same browser; every refusal of the flow; the link's life (refresh, suspension,
 * back-channel logout); the console's and the admins' API.
 */

const CHOICE = [
  { id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'], label: 'Browser' },
]
const SLACK_CLIENT = { id: '1234.5678', secret: 'slackclientsecretfortests01' }

/** A question and its message, for a click that yields the link. */
async function question(stack: SlackStack, title = 'Which browser?') {
  stack.rt.ask({ title, fields: CHOICE })
  return messageAbout(stack, title)
}

const chatKey = (user = OLIVIA) => `slack:T0TEST001:${user.id}`

test('with Sign in with Slack, the link is recorded only once the same browser signed in to Slack as the user it names', async (t) => {
  const slackIdp = await startDemoIdp({
    password: PASSWORD,
    people: [
      {
        sub: 'U0OLIVIA1',
        username: 'olivia-in-slack',
        name: 'olivia',
        email: 'olivia@slack.invalid',
        extraClaims: { 'https://slack.com/team_id': 'T0TEST001', 'https://slack.com/user_id': 'U0OLIVIA1' },
      },
      {
        sub: 'U0OSCAR01',
        username: 'oscar-in-slack',
        name: 'oscar',
        email: 'oscar@slack.invalid',
        extraClaims: { 'https://slack.com/team_id': 'T0TEST001', 'https://slack.com/user_id': 'U0OSCAR01' },
      },
    ],
  })
  t.after(() => slackIdp.close())
  const stack = await startSlackStack(t, {
    env: {
      GATEWAY_SLACK_CLIENT_ID: SLACK_CLIENT.id,
      GATEWAY_SLACK_CLIENT_SECRET: SLACK_CLIENT.secret,
      GATEWAY_SLACK_OIDC_ISSUER: slackIdp.issuer,
    },
  })
  slackIdp.setClient({
    clientId: SLACK_CLIENT.id,
    clientSecret: SLACK_CLIENT.secret,
    redirectUris: [`${stack.base}auth/slack-link/slack-callback`],
    postLogoutRedirectUris: [],
  })
  const signInToSlack = async (browser: Browser, username: string) => {
    let page = await browser.navigate(`${stack.base}auth/slack-link/slack`)
    if (page.text.includes('/login"'))
      page = await browser.submit(page, '/login', { username, password: PASSWORD })
    if (page.text.includes('/consent"')) page = await browser.submit(page, '/consent')
    return page
  }

  // Someone else's Slack account: refused, nothing recorded, and the attempt is spent.
  const first = await linkFor(stack)
  const wrong = await openLink(first.url, 'olivia')
  assert.match(wrong.page.text, /Confirm with Slack/)
  assert.ok(!wrong.page.text.includes('<form method="post"'), 'no plain confirmation with Sign in with Slack')
  const refused = await signInToSlack(wrong.browser, 'oscar-in-slack')
  assert.equal(refused.status, 403)
  assert.match(refused.text, /chat_link_mismatch/)
  assert.equal(await stack.app.people.links?.get(chatKey()), null)
  // A plain confirmation is refused when Sign in with Slack is configured.
  const again = await linkFor(stack)
  const plain = await openLink(again.url, 'olivia')
  const posted = await plain.browser.request(`${stack.base}auth/slack-link/confirm`, {
    method: 'POST',
    form: {},
  })
  assert.equal(posted.status, 403)
  assert.match(posted.text, /chat_link_mismatch/)
  assert.equal(await stack.app.people.links?.get(chatKey()), null)

  // The right one.
  const right = await linkFor(stack)
  const { browser } = await openLink(right.url, 'olivia')
  const done = await signInToSlack(browser, 'olivia-in-slack')
  assert.equal(done.status, 200, done.text)
  assert.match(done.text, /Your Slack account is connected/)
  const record = await stack.app.people.links?.get(chatKey())
  assert.deepEqual([record?.sub, record?.state, record?.userName], ['olivia', 'active', 'olivia'])
})

test('a forwarded link binds nothing: the code goes to the Slack user who asked, and the operator who opened it cannot type it', async (t) => {
  const stack = await startSlackStack(t)
  // Victor, a viewer in Slack, sends his link to Olivia, an operator.
  const { url, message } = await linkFor(stack, VICTOR)
  const { browser, page } = await openLink(url, 'olivia')
  assert.match(page.text, /Slack user: @victor \(U0VICTOR1\)/)
  assert.match(page.text, /will be yours: Olivia Operator \(olivia\)/)
  const asked = await browser.submit(page, 'auth/slack-link/confirm')
  assert.equal(await stack.app.people.links?.get(chatKey(VICTOR)), null, 'her click alone binds nothing')
  assert.equal(asked.status, 200, asked.text)
  assert.match(asked.text, /Type the code from Slack/)
  assert.match(asked.text, /autocomplete="one-time-code"/)
  // The code went to Victor alone, saying who would answer as him; Olivia's own Slack got nothing.
  const dm = await waitFor('the code', () => stack.slack.posts(VICTOR.id)[0])
  assert.match(dm.text, /Olivia Operator \(olivia\) will answer as you/)
  assert.equal(stack.slack.posts(OLIVIA.id).length, 0)
  assert.equal(JSON.stringify(stack.slack.calls).includes(`"channel":"${OLIVIA.id}"`), false)
  // Guessing: each wrong code says how many tries are left, then the link is gone, the right code too.
  const right = codeIn(dm)
  const wrong = right === '00000000' ? '11111111' : '00000000'
  let last = asked
  for (const left of [4, 3, 2, 1]) {
    last = await browser.submit(last, 'auth/slack-link/code', { code: wrong })
    assert.equal(last.status, 400)
    assert.match(last.text, new RegExp(`${left} more tries`))
    assert.match(last.text, /chat_link_code_wrong/)
  }
  const fifth = await browser.submit(last, 'auth/slack-link/code', { code: wrong })
  assert.match(fifth.text, /chat_link_invalid/)
  const late = await browser.request(`${stack.base}auth/slack-link/code`, { form: { code: right } })
  assert.equal(late.status, 400)
  assert.equal(await stack.app.people.links?.get(chatKey(VICTOR)), null)
  // Victor's click still gets the offer to connect his own account.
  const before = stack.slack.ephemerals(VICTOR.id).length
  await click(stack, VICTOR, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, VICTOR, before)).args.text),
    /^Connect your Slack account/,
  )
  assert.equal(repliesSent(stack.rt), 0)
  const records = (await stack.app.audit.recent({ limit: 50 })).filter((r) => r.route === 'auth/slack-link')
  assert.deepEqual(records.map((r) => [r.action, r.status, r.error ?? null, r.sub]).slice(0, 3), [
    ['link', 400, 'chat_link_invalid', null],
    ['link', 400, 'chat_link_invalid', 'olivia'],
    ['link', 400, 'chat_link_code_wrong', 'olivia'],
  ])
})

test('“This is not me” in Slack ends the link for the page that asked; the same button from another Slack user changes nothing', async (t) => {
  const stack = await startSlackStack(t)
  const notMe = (user: typeof OLIVIA, dm: Parameters<typeof stack.slack.click>[1]) =>
    postInteraction(stack.interactions, stack.slack.click(user, dm, 'krg:link-not-me'))

  // Oscar presses it on Olivia's message (Slack says who clicked): nothing changes, her code still works.
  const first = await linkFor(stack)
  const mine = await openLink(first.url, 'olivia')
  const asked = await mine.browser.submit(mine.page, 'auth/slack-link/confirm')
  const dm = await waitFor('the code', () => stack.slack.posts(OLIVIA.id)[0])
  assert.equal((await notMe(OSCAR, dm)).status, 200)
  await waitFor('counted', async () =>
    (await stack.app.audit.recent({ limit: 50 })).some((r) => r.action === 'not_me'),
  )
  const reload = await mine.browser.navigate(`${stack.base}auth/slack-link/confirm`)
  assert.match(reload.text, /Type the code from Slack/)
  const done = await mine.browser.submit(asked, 'auth/slack-link/code', { code: codeIn(dm) })
  assert.match(done.text, /Your Slack account is connected/)
  assert.equal((await stack.app.people.links?.get(chatKey()))?.sub, 'olivia')
  await stack.app.people.links?.remove(chatKey())

  // Olivia herself says it is not her: the message says nothing was linked, the page says she declined.
  const second = await linkFor(stack)
  const again = await openLink(second.url, 'olivia')
  const waiting = await again.browser.submit(again.page, 'auth/slack-link/confirm')
  const dm2 = await waitFor('the second code', () => stack.slack.posts(OLIVIA.id)[1])
  const code2 = codeIn(dm2)
  assert.equal((await notMe(OLIVIA, dm2)).status, 200)
  await waitFor('the message updated', () => dm2.updates === 1)
  assert.match(dm2.text, /Nothing was linked/)
  assert.deepEqual(
    dm2.blocks.filter((b) => b.type === 'actions'),
    [],
    'no button left',
  )
  const told = await again.browser.navigate(`${stack.base}auth/slack-link/confirm`)
  assert.equal(told.status, 409)
  assert.match(told.text, /chat_link_declined/)
  const typed = await again.browser.submit(waiting, 'auth/slack-link/code', { code: code2 })
  assert.equal(typed.status, 409)
  assert.equal(await stack.app.people.links?.get(chatKey()), null)
  const trail = (await stack.app.audit.recent({ limit: 50 })).filter((r) => r.action === 'not_me')
  assert.deepEqual(
    trail.map((r) => [r.status, r.error ?? null, r.sub, r.via]),
    [
      [200, null, 'olivia', 'slack'],
      [403, 'chat_link_mismatch', null, 'slack'],
    ],
  )
})

test('every refusal of the link flow: no token, a forged, expired or used one, no pending sign-in, a cross-site confirmation', async (t) => {
  const stack = await startSlackStack(t)
  const page = async (url: string) => {
    const visit = await new Browser().navigate(url)
    return {
      status: visit.status,
      code: /Error code: <code>([a-z_]+)<\/code>/.exec(visit.text)?.[1],
      text: visit.text,
    }
  }
  assert.deepEqual((({ status, code }) => ({ status, code }))(await page(`${stack.base}auth/slack-link`)), {
    status: 400,
    code: 'chat_link_invalid',
  })
  const { url } = await linkFor(stack)
  const token = new URL(url).searchParams.get('t') ?? ''
  const forged = `${token.slice(0, -4)}AAAA`
  assert.equal((await page(`${stack.base}auth/slack-link?t=${forged}`)).code, 'chat_link_invalid')
  // Signed with the gateway's key, but expired.
  const key = new Uint8Array(
    hkdfSync(
      'sha256',
      'cookie-secret-for-tests-0123456789abcdef',
      'kasm-runtime-gateway',
      'chat-link token',
      32,
    ),
  )
  const expired = await new SignJWT({ chat: 'slack', ws: 'T0TEST001', u: 'U0OLIVIA1' })
    .setProtectedHeader({ alg: 'HS256', typ: 'krg-chat-link+jwt' })
    .setAudience('krg:chat-link')
    .setJti('x')
    .setIssuedAt(Math.floor(Date.now() / 1000) - 1200)
    .setExpirationTime(Math.floor(Date.now() / 1000) - 600)
    .sign(key)
  const old = await page(`${stack.base}auth/slack-link?t=${expired}`)
  assert.equal(old.code, 'chat_link_invalid')
  assert.match(old.text, /has expired: a link works for 10 minutes/)
  // No sign-in waits in this browser.
  assert.equal((await page(`${stack.base}auth/slack-link/confirm`)).code, 'chat_link_invalid')

  const { browser, page: confirm } = await openLink(url, 'olivia')
  assert.equal(confirm.status, 200)
  // Another site's form posting to the confirmation, with this browser's cookies: refused, nothing recorded.
  const crossSite = await fetch(`${stack.base}auth/slack-link/confirm`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'sec-fetch-site': 'cross-site',
      origin: 'https://evil.example',
      cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
    },
    body: '',
  })
  assert.equal(crossSite.status, 403)
  assert.equal(((await crossSite.json()) as { error: string }).error, 'csrf_refused')
  assert.equal(await stack.app.people.links?.get(chatKey()), null)
  // The page's own forms and the code: recorded; a second confirmation finds nothing waiting.
  assert.equal((await confirmWithCode(stack.slack, OLIVIA, browser, confirm)).done.status, 200)
  const twice = await browser.request(`${stack.base}auth/slack-link/confirm`, { method: 'POST', form: {} })
  assert.equal(twice.status, 400)
  assert.match(twice.text, /chat_link_invalid/)

  // The same link opened again after it was used: signed in, confirmed, refused.
  const reuse = await openLink(url, 'olivia')
  const { done: used } = await confirmWithCode(stack.slack, OLIVIA, reuse.browser, reuse.page)
  assert.equal(used.status, 400)
  assert.match(used.text, /was used already/)
  const records = (await stack.app.audit.recent({ limit: 50 })).filter((r) => r.route === 'auth/slack-link')
  assert.deepEqual(
    records.map((r) => [r.action, r.status, r.error ?? null, r.sub]),
    [
      ['link', 400, 'chat_link_invalid', 'olivia'],
      ['send_code', 303, null, 'olivia'],
      ['send_code', 400, 'chat_link_invalid', null],
      ['link', 200, null, 'olivia'],
      ['send_code', 303, null, 'olivia'],
      ['send_code', 403, 'csrf_refused', null],
    ],
  )
})

test('a refused refresh suspends the link; a refreshed role is what answers; a back-channel logout ends it', async (t) => {
  const stack = await startSlackStack(t, { env: { GATEWAY_OIDC_REFRESH_S: '1' } })
  const message = await question(stack)
  const { browser } = await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  const links = stack.app.people.links
  assert.ok(links)

  // Her role at the IdP changes: the next click, once the refresh is due, answers as a viewer would.
  stack.idp.updatePerson('olivia', { roles: ['viewer'] })
  await waitFor(
    'the refresh due',
    async () => ((await links.get(chatKey()))?.idp?.refreshAt ?? 0) < Date.now(),
  )
  let before = stack.slack.ephemerals(OLIVIA.id).length
  await click(stack, OLIVIA, message, 'krg:choose:0')
  assert.match(String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text), /You may only watch/)
  assert.equal(stack.idp.grants.get('refresh_token'), 1)

  // She is disabled: the refresh is refused and the link suspended; she is asked to connect again.
  stack.idp.updatePerson('olivia', { roles: ['operator'], disabled: true })
  await waitFor(
    'the refresh due',
    async () => ((await links.get(chatKey()))?.idp?.refreshAt ?? 0) < Date.now(),
  )
  before = stack.slack.ephemerals(OLIVIA.id).length
  await click(stack, OLIVIA, message, 'krg:choose:0')
  const suspended = await ephemeralAfter(stack.slack, OLIVIA, before)
  assert.match(String(suspended.args.text), /Connect your Slack account again/)
  assert.equal((await links.get(chatKey()))?.state, 'suspended')
  assert.equal(repliesSent(stack.rt), 0)

  // Linked again (enabled), then she signs out at the IdP itself in that browser: the IdP tells the gateway.
  stack.idp.updatePerson('olivia', { disabled: false })
  const { page } = await openLink(linkIn(suspended), 'olivia', browser)
  await confirmWithCode(stack.slack, OLIVIA, browser, page)
  assert.equal((await links.get(chatKey()))?.state, 'active')
  const end = await browser.navigate(`${stack.idp.issuer}/session/end`)
  await browser.submit(end, '/session/end/confirm', { logout: 'yes' })
  await waitFor('the link ended', async () => (await links.get(chatKey())) === null)
  const logout = (await stack.app.audit.recent({ limit: 50 })).find(
    (r) => r.route === 'auth/backchannel-logout',
  )
  assert.deepEqual([logout?.status, logout?.sub], [200, 'olivia'])
  before = stack.slack.ephemerals(OLIVIA.id).length
  await click(stack, OLIVIA, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text),
    /^Connect your Slack account to answer/,
  )
})

test('the console shows the person their links and removes one; admins list and remove those of their teams', async (t) => {
  const stack = await startSlackStack(t)
  const message = await question(stack)
  await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  await link(stack, VICTOR, message, 'victor', 'krg:choose:0')

  const console = new Browser()
  await signInAt(stack, console)
  const cookie = sessionCookie(console)
  const mine = await fetch(`${stack.base}api/chat-links`, { headers: { cookie } })
  assert.equal(mine.status, 200)
  const { links } = (await mine.json()) as { links: Record<string, unknown>[] }
  assert.deepEqual(
    links.map((l) => [l.chat, l.workspace, l.workspaceName, l.user, l.userName, l.sub, l.state]),
    [['slack', 'T0TEST001', 'krg-tests', 'U0OLIVIA1', 'olivia', 'olivia', 'active']],
  )
  assert.ok(Date.parse(String(links[0]?.expiresAt)) > Date.now() + 29 * 86_400_000)
  assert.ok(!JSON.stringify(links).includes('sealed'), 'never the IdP tokens')
  assert.equal((await fetch(`${stack.base}api/chat-links`)).status, 401)

  const del = (path: string, headers: Record<string, string>) =>
    fetch(`${stack.base}${path}`, { method: 'DELETE', headers })
  const same = { cookie, 'sec-fetch-site': 'same-origin' }
  // Victor's link is not hers: unknown to her. A cross-site DELETE is refused.
  assert.equal((await del('api/chat-links/slack/T0TEST001/U0VICTOR1', same)).status, 404)
  assert.equal(
    (await del('api/chat-links/slack/T0TEST001/U0OLIVIA1', { cookie, 'sec-fetch-site': 'cross-site' }))
      .status,
    403,
  )
  assert.equal((await del('api/chat-links/slack/t0test001/U0OLIVIA1', same)).status, 400)
  assert.equal((await del('api/chat-links/slack/T0TEST001/U0OLIVIA1', same)).status, 204)
  assert.deepEqual(await (await fetch(`${stack.base}api/chat-links`, { headers: { cookie } })).json(), {
    links: [],
  })
  const before = stack.slack.ephemerals(OLIVIA.id).length
  await click(stack, OLIVIA, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text),
    /^Connect your Slack account/,
  )

  const auth = async (roles: string[], teams: string[]) => ({
    authorization: `Bearer ${await bearer({ sub: `admin-${teams.join('-')}`, roles, teams })}`,
  })
  const blue = await auth(['admin'], ['blue'])
  const green = await auth(['admin'], ['green'])
  const list = async (headers: Record<string, string>) => {
    const res = await fetch(`${stack.base}admin/chat-links`, { headers })
    return { status: res.status, body: (await res.json()) as { links?: { sub: string }[] } }
  }
  assert.deepEqual(
    (await list(blue)).body.links?.map((l) => l.sub),
    ['victor'],
  )
  assert.deepEqual((await list(green)).body.links, [])
  assert.equal((await list(await auth(['operator'], ['blue']))).status, 403)
  assert.equal((await del('admin/chat-links/slack/T0TEST001/U0VICTOR1', green)).status, 404)
  assert.equal((await del('admin/chat-links/slack/T0TEST001/U0VICTOR1', blue)).status, 204)
  assert.equal((await del('admin/chat-links/slack/T0TEST001/U0VICTOR1', blue)).status, 404)
  const records = (await stack.app.audit.recent({ limit: 50 })).filter((r) => r.route.endsWith('chat-links'))
  assert.deepEqual(
    records.map((r) => [r.route, r.action, r.status, r.sub]),
    [
      ['admin/chat-links', 'delete', 404, 'admin-blue'],
      ['admin/chat-links', 'delete', 204, 'admin-blue'],
      ['admin/chat-links', 'delete', 404, 'admin-green'],
      ['chat-links', 'unlink', 204, 'olivia'],
      // Refused before the route ran (its parameters, the cross-site rule): the route's name, no action.
      ['chat-links', undefined, 400, 'olivia'],
      ['chat-links', undefined, 403, 'olivia'],
      ['chat-links', 'unlink', 404, 'olivia'],
    ],
  )
})

test('a back-channel logout naming only the person ends their links made before it, on the IdP’s word alone', async (t) => {
  const stack = await startSlackStack(t)
  const message = await question(stack)
  await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  await link(stack, VICTOR, message, 'victor', 'krg:choose:0')
  const logout = async (claims: Record<string, unknown>) => {
    const token = await stack.idp.sign(
      {
        iss: stack.idp.issuer,
        aud: 'kasm-runtime-gateway',
        iat: Math.floor(Date.now() / 1000),
        jti: randomBytes(8).toString('hex'),
        events: { 'http://schemas.openid.net/event/backchannel-logout': {} },
        ...claims,
      },
      { typ: 'logout+jwt' },
    )
    const res = await fetch(`${stack.base}auth/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }).toString(),
    })
    return { status: res.status, body: await res.json() }
  }
  // A token this IdP did not sign ends nothing.
  const forged = await fetch(`${stack.base}auth/backchannel-logout`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ logout_token: 'not-a-token' }).toString(),
  })
  assert.equal(forged.status, 400)
  assert.notEqual(await stack.app.people.links?.get(chatKey()), null)

  assert.deepEqual(await logout({ sub: 'olivia' }), { status: 200, body: { ended: 1 } })
  assert.equal(await stack.app.people.links?.get(chatKey()), null)
  assert.notEqual(await stack.app.people.links?.get(chatKey(VICTOR)), null, 'only that person')
  const before = stack.slack.ephemerals(OLIVIA.id).length
  await click(stack, OLIVIA, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text),
    /^Connect your Slack account/,
  )
})
