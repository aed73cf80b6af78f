import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { Notification } from '../../src/notify/notification.ts'
import type { ChatTarget } from '../../src/notify/targets.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { fastEventEnv } from '../events/helpers.ts'
import {
  type BotFrameworkStandIn,
  type ConnectorActivity,
  channelConversationId,
  invokeActivity,
  startBotFramework,
  TENANT_ID,
  type TeamsUser,
  teamsUser,
} from '../fixtures/bot-framework.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { Browser, type SignInStack, startSignInStack, type Visit } from '../signin/harness.ts'
import { openLink, PEOPLE } from './helpers.ts'
import {
  action,
  actionsOf,
  type Card,
  cardAbout as cardAboutIn,
  cardOf,
  cardText,
  clickCard,
  openUrl,
} from './msteams-helpers.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('answers from Microsoft Teams', () => {
  /**
   * The Teams adapter end to end on one gateway (shared by the file), against the Bot Framework stand-in, a real
   * IdP and a simulated runtime: a question's card, answers by button and by form through signed invokes, the
   * clicker's refreshed card (field errors, the runtime's 422, viewer refused, answered first), the shared card
   * updated when the question closes anywhere, and linking both ways (Entra sign-in, the code in Teams).
   */

  const TOKEN = 'messaging-token-for-teams-tests'
  const CONVERSATION = channelConversationId('blue')
  /** Olivia is known by her Entra sign-in; Oscar and Victor link with a code. */
  const OLIVIA = teamsUser('Olivia Operator')
  const OSCAR = teamsUser('Oscar Operator')
  const VICTOR = teamsUser('Victor Viewer')

  let bf: BotFrameworkStandIn
  let stack: SignInStack
  let rt: SimulatedRuntime
  let endpoint: string
  const cleanups: (() => unknown)[] = []

  before(async () => {
    bf = await startBotFramework()
    cleanups.push(() => bf.close())
    const dir = await mkdtemp(join(tmpdir(), 'krg-teams-'))
    const file = join(dir, 'notify.json')
    await writeFile(
      file,
      JSON.stringify({
        teams: {
          // Olivia (linked in Teams only, by her Entra sign-in) gets every card in her 1:1 chat with the bot too.
          blue: [
            { msteams: { conversation: CONVERSATION, serviceUrl: bf.serviceUrl } },
            { person: 'olivia' },
          ],
        },
      }),
    )
    const idpPort = await freePort()
    const people = PEOPLE.map((p) =>
      p.sub === 'olivia' ? { ...p, extraClaims: { tid: TENANT_ID, oid: OLIVIA.aadObjectId } } : p,
    )
    stack = await startSignInStack(
      { after: (fn) => void cleanups.push(fn) },
      {
        env: {
          ...fastEventEnv,
          ...bf.env(),
          GATEWAY_NOTIFY_FILE: file,
          GATEWAY_NOTIFY_RETRY_MS: '20',
          GATEWAY_NOTIFY_RETRY_FOR_S: '2',
          GATEWAY_TEAMS_ENTRA_ISSUER: `http://127.0.0.1:${idpPort}`,
          // An answer held past the invoke's budget (the last test) is released only then: the runtime's answer
          // must not time out while a loaded machine gets there.
          GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: '60000',
        },
        idp: { people, port: idpPort },
      },
    )
    rt = await startSimulatedRuntime({
      messagingToken: TOKEN,
      sessionToken: 'session-token-for-teams-tests',
      redactPatterns: ['secret-\\d+'],
    })
    cleanups.push(() => rt.close())
    await stack.app.sessions.put({
      kasmId: 'k1',
      upstream: rt.url,
      team: 'blue',
      messagingToken: TOKEN,
      source: 'admin',
    })
    endpoint = `${stack.base}teams/messages`
    // Olivia signs in to the gateway once: her Entra ids make her known in Teams.
    const browser = new Browser()
    let page = await browser.navigate(`${stack.base}auth/login`)
    if (page.text.includes('/login"'))
      page = await browser.submit(page, '/login', { username: 'olivia', password: stack.idp.password })
    if (page.text.includes('/consent"')) page = await browser.submit(page, '/consent')
    assert.ok(browser.cookies.has('krg_session'), 'Olivia signed in')
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })

  const cardAbout = (title: string) => cardAboutIn(bf, CONVERSATION, title)
  const click = (
    user: TeamsUser,
    posted: ConnectorActivity,
    title: string,
    inputs: Record<string, string> = {},
  ) => clickCard(bf, endpoint, CONVERSATION, user, posted, title, inputs)

  function repliesSent(): number {
    return rt.received.filter((r) => r.method === 'POST' && r.url.split('?')[0] === '/messages').length
  }

  async function runtimeRequest(id: string): Promise<Record<string, unknown>> {
    const res = await fetch(`${rt.url}requests/${id}`, { headers: { 'x-kasm-runtime-session-token': TOKEN } })
    return (await res.json()) as Record<string, unknown>
  }

  async function replyValues(id: string): Promise<unknown> {
    const request = await runtimeRequest(id)
    const res = await fetch(`${rt.url}messages/${String(request.reply_id)}`, {
      headers: { 'x-kasm-runtime-session-token': TOKEN },
    })
    return ((await res.json()) as { values?: unknown }).values
  }

  /** The 1:1 chat of the bot with `user`, and the cards posted there. */
  function personalCards(user: TeamsUser): Card[] {
    const chat = bf.personal.find((p) => p.userId === user.id)
    return chat === undefined ? [] : bf.posted(chat.id).map((a) => cardOf(a))
  }

  /** The code of a link-code card ("… 1234 5678"). */
  function codeIn(card: Card): string {
    const code = /(\d{4}) (\d{4})/.exec(cardText(card))
    assert.ok(code, `no code in ${cardText(card)}`)
    return `${code[1]}${code[2]}`
  }

  /** `user` links to `username` by the code the bot sends them in Teams, starting from a click on `posted`. */
  async function linkByCode(user: TeamsUser, posted: ConnectorActivity, title: string, username: string) {
    const card = await click(user, posted, title)
    assert.match(cardText(card), /Connect your Teams account to answer from Teams/)
    const { browser, page } = await openLink(openUrl(card, 'Connect your Teams account'), username)
    assert.equal(page.status, 200, page.text)
    assert.match(page.text, /Connect your Teams account/)
    const before = personalCards(user).length
    const asked = await browser.submit(page, 'auth/slack-link/confirm')
    assert.equal(asked.status, 200, asked.text)
    assert.match(asked.text, /Type the code from Teams/)
    const dm = await waitFor(`the code sent to ${user.name}`, () => personalCards(user)[before])
    const done = await browser.submit(asked, 'auth/slack-link/code', { code: codeIn(dm) })
    assert.equal(done.status, 200, done.text)
    assert.match(done.text, /Your Teams account is connected/)
  }

  const CHOICE = [
    { id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'], label: 'Browser' },
  ]

  test('a question opens: one card in the team’s conversation, with a button per choice and the console link', async () => {
    const q = rt.ask({ title: 'Which browser?', fields: CHOICE, deadlineS: 300 })
    const posted = await cardAbout('Which browser?')
    const card = cardOf(posted)
    assert.deepEqual(
      card.actions?.map((a) => a.title),
      ['chrome', 'firefox', 'Open in console'],
    )
    assert.equal(
      openUrl(card, 'Open in console'),
      `${stack.base}sessions/k1?run=${rt.run}&request=${q.request_id}`,
    )
    assert.equal(
      bf.posted(CONVERSATION).filter((a) => cardText(cardOf(a)).includes('Which browser?')).length,
      1,
    )

    // Olivia is known by her Entra sign-in: her click is her answer, and she gets the answered card.
    const mine = await click(OLIVIA, posted, 'firefox')
    assert.match(cardText(mine), /Your answer was sent\./)
    assert.match(cardText(mine), /Answered by Olivia Operator in Teams · Browser: firefox/)
    assert.deepEqual(await replyValues(q.request_id), { browser: 'firefox' })
    const record = (await stack.app.audit.recent({ limit: 50 })).find(
      (r) => r.replyTo === q.request_id && r.status < 300,
    )
    assert.deepEqual([record?.sub, record?.via], ['olivia', 'msteams'])
    // Everyone's card says so.
    await waitFor('the shared card updated', () => posted.updates === 1)
    assert.match(cardText(cardOf(posted)), /Question closed/)
    assert.match(cardText(cardOf(posted)), /Answered by Olivia Operator in Teams · Browser: firefox/)
    assert.equal(
      cardOf(posted).actions?.some((a) => a.type === 'Action.Execute'),
      false,
    )
  })

  test('a form answer: the gateway’s check and the runtime’s 422 come back next to the inputs; a good one is sent', async () => {
    const q = rt.ask({
      title: 'Nights and key?',
      fields: [
        { id: 'nights', type: 'integer', minimum: 1, maximum: 14, required: true, label: 'Nights' },
        { id: 'key', type: 'string', pattern: '^[a-z]+-\\d+$', required: true },
      ],
    })
    const posted = await cardAbout('Nights and key?')
    const sent = repliesSent()
    const tooMany = await click(OLIVIA, posted, 'Answer', { 'f:nights': '20', 'f:key': 'abc-1' })
    const error = tooMany.body.find((e) => e.id === 'krg-error-nights')
    assert.ok(error, cardText(tooMany))
    assert.match(JSON.stringify(error), /at most 14/)
    // The values typed are kept.
    assert.equal(tooMany.body.find((e) => e.id === 'f:key')?.value, 'abc-1')
    assert.equal(repliesSent(), sent, 'nothing sent')
    // The runtime redacts what looks like a secret before it checks: only its 422 can say.
    const refused = await click(OLIVIA, posted, 'Answer', { 'f:nights': '2', 'f:key': 'secret-42' })
    assert.match(JSON.stringify(refused.body.find((e) => e.id === 'krg-error-key')), /does not match/)
    assert.equal((await runtimeRequest(q.request_id)).state, 'open')
    const done = await click(OLIVIA, posted, 'Answer', { 'f:nights': '2', 'f:key': 'abc-1' })
    assert.match(cardText(done), /Answered by Olivia Operator in Teams · Nights: 2 · key: abc-1/)
    assert.deepEqual(await replyValues(q.request_id), { nights: 2, key: 'abc-1' })
    await waitFor('the shared card updated', () => posted.updates === 1)
  })

  test('an unlinked Teams user connects by the code the bot sends them in Teams, then answers; a viewer may only watch', async () => {
    const q = rt.ask({ title: 'Oscar’s turn?', fields: [{ id: 'ok', type: 'boolean', required: true }] })
    const posted = await cardAbout('Oscar’s turn?')
    const sent = repliesSent()
    await linkByCode(OSCAR, posted, 'Yes', 'oscar')
    assert.equal(repliesSent(), sent, 'the first click sent nothing')
    // The link is listed where Slack's are.
    const links = await fetch(`${stack.base}admin/chat-links`, {
      headers: { authorization: `Bearer ${await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })}` },
    })
    const listed = ((await links.json()) as { links: { chat: string; user: string; sub: string }[] }).links
    assert.ok(listed.some((l) => l.chat === 'msteams' && l.user === OSCAR.aadObjectId && l.sub === 'oscar'))
    assert.ok(listed.some((l) => l.chat === 'msteams' && l.user === OLIVIA.aadObjectId && l.sub === 'olivia'))

    // Victor links too, but is a viewer of blue: he may only watch, and nothing is sent.
    await linkByCode(VICTOR, posted, 'No', 'victor')
    const watch = await click(VICTOR, posted, 'No')
    assert.match(
      cardText(watch),
      /You may only watch this session: answering needs the operator role in team blue\./,
    )
    assert.equal(repliesSent(), sent)

    const answered = await click(OSCAR, posted, 'Yes')
    assert.match(cardText(answered), /Answered by Oscar Operator in Teams · ok: Yes/)
    assert.deepEqual(await replyValues(q.request_id), { ok: true })
  })

  test('a forwarded link: the code goes to the Teams user the link names, never to whoever opened it; “This is not me” by another changes nothing', async () => {
    const eve = teamsUser('Eve Forwarder')
    rt.ask({ title: 'Forwarded?', fields: [{ id: 'ok', type: 'boolean' }] })
    const posted = await cardAbout('Forwarded?')
    const card = await click(eve, posted, 'Yes')
    // Eve sends her link to Olivia, who opens it and asks for the code.
    const { browser, page } = await openLink(openUrl(card, 'Connect your Teams account'), 'olivia')
    const asked = await browser.submit(page, 'auth/slack-link/confirm')
    assert.match(asked.text, /Type the code from Teams/)
    const dm = await waitFor('the code sent to Eve', () => personalCards(eve)[0])
    assert.equal(personalCards(OLIVIA).length, 0, 'nothing reaches Olivia’s Teams')
    // Someone other than Eve presses "This is not me" on Eve's card: nothing changes.
    const notMe = action(dm, 'This is not me')
    const other = await bf.send(
      endpoint,
      invokeActivity({ serviceUrl: bf.serviceUrl, personal: true, conversationId: 'a:x' }, OSCAR, notMe),
    )
    assert.match(
      cardText((other.json as { value: Card }).value),
      /This code was not sent to you: nothing changed\./,
    )
    // Eve herself declines: the page says so, and the code no longer works.
    const own = await bf.send(
      endpoint,
      invokeActivity({ serviceUrl: bf.serviceUrl, personal: true, conversationId: 'a:x' }, eve, notMe),
    )
    assert.match(
      cardText((own.json as { value: Card }).value),
      /Nothing was linked: you said this was not you/,
    )
    const refused: Visit = await browser.submit(asked, 'auth/slack-link/code', { code: codeIn(dm) })
    assert.equal(refused.status, 409, refused.text)
    assert.match(refused.text, /chat_link_declined/)
    const links = await stack.app.people.links?.get(`msteams:${TENANT_ID}:${eve.aadObjectId}`)
    assert.equal(links, null, 'Eve is linked to nobody')
  })

  test('two people answer at once: one reply; the other is told who answered first and what', async () => {
    const q = rt.ask({ title: 'Race?', fields: CHOICE })
    const posted = await cardAbout('Race?')
    const [a, b] = await Promise.all([click(OLIVIA, posted, 'chrome'), click(OSCAR, posted, 'firefox')])
    const values = (await replyValues(q.request_id)) as { browser: string }
    const [won, lost] = values.browser === 'chrome' ? [a, b] : [b, a]
    const winner = values.browser === 'chrome' ? 'Olivia Operator' : 'Oscar Operator'
    assert.match(cardText(won), /Your answer was sent\./)
    assert.match(
      cardText(lost),
      new RegExp(`Someone answered first\\. Answered by ${winner} in Teams · Browser: ${values.browser}`),
    )
    const replies = rt.received.filter((r) => r.method === 'POST' && r.url.split('?')[0] === '/messages')
    assert.ok(replies.length > 0)
    await waitFor('the shared card updated', () => posted.updates === 1)
  })

  test('an answer given elsewhere (the console’s route) and a timeout update every copy of the card', async () => {
    const q = rt.ask({ title: 'Elsewhere?', fields: CHOICE })
    const posted = await cardAbout('Elsewhere?')
    // The card as someone still looks at it, before it is updated.
    const asSeen = { ...posted, activity: structuredClone(posted.activity) }
    const res = await fetch(`${stack.origin}/desktop/k1/mcp/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${await bearer({ sub: 'carol', name: 'Carol Console', roles: ['operator'], teams: ['blue'] })}`,
      },
      body: JSON.stringify({
        run: rt.run,
        key: 'console-1',
        reply_to: q.request_id,
        revision: 1,
        values: { browser: 'chrome' },
      }),
    })
    assert.equal(res.status, 202, await res.text())
    await waitFor('the card updated', () => posted.updates === 1)
    assert.match(cardText(cardOf(posted)), /Answered by Carol Console · Browser: chrome/)
    // A click that comes after is told, and nothing is sent.
    const sent = repliesSent()
    const late = await click(OSCAR, asSeen, 'firefox')
    assert.match(cardText(late), /Someone answered first\./)
    assert.equal(repliesSent(), sent)

    rt.ask({ title: 'Quick?', fields: CHOICE, deadlineS: 1 })
    const quick = await cardAbout('Quick?')
    await waitFor('timed out', () => quick.updates === 1)
    assert.match(cardText(cardOf(quick)), /Timed out: nobody answered in time/)
  })

  /** The titles of a card's "I'm on it" / "Give it back" (the action set in its body). */
  const claimButtons = (card: Card) =>
    actionsOf(card)
      .filter((a) => String(a.verb).startsWith('krg.claim') || a.verb === 'krg.release')
      .map((a) => a.title)

  test("I'm on it from Teams: the console's claim as the person, the holder on every copy of the card, others told who; a viewer refused; given back; a person target in a 1:1 chat", async () => {
    const q = rt.ask({ title: 'Who takes it?', fields: CHOICE })
    const posted = await cardAbout('Who takes it?')
    assert.deepEqual(claimButtons(cardOf(posted)), ['I’m on it'])
    const asSeen = { ...posted, activity: structuredClone(posted.activity) }
    // The person target: Olivia has no Slack account, so the card reaches her in her 1:1 chat with the bot.
    const dm = await waitFor('Olivia’s 1:1 chat', () =>
      bf.personal.find((p) => p.userId === OLIVIA.aadObjectId && p.tenantId === TENANT_ID),
    )
    const inDm = await waitFor('the card in her 1:1 chat', () =>
      bf.posted(dm.id).find((a) => cardText(cardOf(a)).includes('Who takes it?')),
    )

    const mine = await click(OLIVIA, posted, 'I’m on it')
    assert.match(cardText(mine), /You are on this question/)
    assert.match(cardText(mine), /Olivia Operator is on it since \d\d:\d\d UTC/)
    assert.deepEqual(claimButtons(mine), ['Give it back'])
    const held = await stack.app.overview.claims.of('k1', rt.run)
    assert.equal(held.get(q.request_id)?.sub, 'olivia')
    // Everyone's card names her, the channel's and the 1:1 chat's (request.claimed).
    for (const copy of [posted, inDm])
      await waitFor('the holder on the card', () =>
        cardText(cardOf(copy)).includes('Olivia Operator is on it'),
      )
    assert.deepEqual(claimButtons(cardOf(posted)), ['Give it back'])

    // Oscar, on a copy from before: told who holds it and since when; he cannot give it back either.
    const late = await click(OSCAR, asSeen, 'I’m on it')
    assert.match(cardText(late), /Olivia Operator is already on this question since \d\d:\d\d UTC\./)
    const notHis = await click(OSCAR, posted, 'Give it back')
    assert.match(
      cardText(notHis),
      /Olivia Operator is on this question since .*: only they can give it back\./,
    )
    // Victor may only watch.
    const watch = await click(VICTOR, asSeen, 'I’m on it')
    assert.match(cardText(watch), /You may only watch this session/)
    assert.equal((await stack.app.overview.claims.of('k1', rt.run)).get(q.request_id)?.sub, 'olivia')

    const back = await click(OLIVIA, posted, 'Give it back')
    assert.match(cardText(back), /You gave this question back\./)
    assert.equal((await stack.app.overview.claims.of('k1', rt.run)).get(q.request_id), undefined)
    await waitFor('nobody on the card', () => !cardText(cardOf(posted)).includes('is on it'))
    assert.deepEqual(claimButtons(cardOf(posted)), ['I’m on it'])
    // A lapse (as the engine tells it, to every target and to the holder as a person): only her 1:1 chat says so.
    const seq = 999_001
    const lapsed: Notification = {
      key: ['k1', rt.run, String(seq), 'request.unclaimed', q.request_id].join('\u0000'),
      type: 'request.unclaimed',
      kasmId: 'k1',
      team: 'blue',
      run: rt.run,
      seq,
      reminder: false,
      request: { request_id: q.request_id, title: 'Who takes it?', deadline: null, field_ids: ['browser'] },
      unclaimed: {
        holder: { sub: 'olivia', name: 'Olivia Operator', at: new Date().toISOString() },
        reason: 'lapsed',
      },
    }
    const targets: ChatTarget[] = [
      {
        chat: 'msteams',
        conversation: CONVERSATION,
        serviceUrl: bf.serviceUrl,
        label: `msteams:${CONVERSATION}`,
      },
      {
        chat: 'msteams',
        conversation: '',
        serviceUrl: bf.serviceUrl,
        label: 'person:olivia/msteams',
        person: { tenantId: TENANT_ID, user: OLIVIA.aadObjectId },
      },
    ]
    for (const target of targets) {
      const delivered = await stack.app.chat?.deliver({
        key: lapsed.key,
        delivery: 'test',
        notification: lapsed,
        target,
        url: stack.base,
      })
      assert.deepEqual(delivered, { ok: true })
    }
    // Her 1:1 chat was made once, for the card; the claim, the release and the lapse found it kept.
    assert.equal(
      bf.calls.filter(
        (c) =>
          c.method === 'POST' &&
          c.path === 'v3/conversations' &&
          JSON.stringify(c.body).includes(OLIVIA.aadObjectId),
      ).length,
      1,
    )
    const told = bf.posted(dm.id).filter((a) => cardText(cardOf(a)).includes('lapsed'))
    assert.deepEqual(
      told.map((a) => cardText(cardOf(a))),
      ['Your claim on “Who takes it?” lapsed after 90 s without an answer; the escalation goes on.'],
    )
    assert.equal(bf.posted(CONVERSATION).filter((a) => cardText(cardOf(a)).includes('lapsed')).length, 0)
    // Each invoke counted once, with what came of it.
    const metrics = await stack.app.metrics.registry.getSingleMetricAsString('krg_msteams_activities_total')
    for (const outcome of ['taken', 'given_back', 'held'])
      assert.match(metrics, new RegExp(`type="invoke",outcome="${outcome}"\\} [1-9]`), outcome)
    assert.doesNotMatch(metrics, /type="invoke",outcome="accepted"\} [1-9]/)
  })

  test('a person’s 1:1 chat that went away (the app removed and added again): made again, and the card reaches it', async () => {
    const hers = () => bf.personal.filter((p) => p.userId === OLIVIA.aadObjectId)
    const cancel = async (id: string) => {
      const res = await fetch(`${rt.url}requests/${id}/cancel`, {
        method: 'POST',
        headers: { 'x-kasm-runtime-session-token': 'session-token-for-teams-tests' },
      })
      assert.equal(res.status, 200, await res.text())
    }
    const first = rt.ask({ title: 'Still there?', fields: CHOICE })
    const before = await waitFor('Olivia’s 1:1 chat', () => hers()[0])
    const card = await waitFor('the card in her 1:1 chat', () =>
      bf.posted(before.id).find((a) => cardText(cardOf(a)).includes('Still there?')),
    )
    await cancel(first.request_id)
    await waitFor('the card closed', () => card.updates === 1)
    // She removes the bot's app: the chat this replica kept answers 403 from now on.
    bf.endPersonal(OLIVIA.aadObjectId)
    const second = rt.ask({ title: 'Back again?', fields: CHOICE })
    const chat = await waitFor('her new 1:1 chat', () => hers()[1])
    assert.notEqual(chat.id, before.id)
    await waitFor('the card in her new 1:1 chat', () =>
      bf.posted(chat.id).find((a) => cardText(cardOf(a)).includes('Back again?')),
    )
    assert.equal(hers().length, 2)
    const refused = bf.calls.filter((c) => c.status === 403 && decodeURIComponent(c.path).includes(before.id))
    assert.equal(refused.length, 1, 'the kept chat was tried once, then made again')
    await cancel(second.request_id)
  })

  test('a reminder replies under the card, in its thread; a cancel updates the card for everyone', async () => {
    const q = rt.ask({ title: 'Remind me?', fields: CHOICE, deadlineS: 4 })
    const posted = await cardAbout('Remind me?')
    // At half the deadline: a reply in the card's thread (a channel's reply is posted to `<channel>;messageid=`).
    const thread = `${CONVERSATION};messageid=${posted.id}`
    const reminder = await waitFor('the reminder', () => bf.posted(thread)[0])
    assert.match(cardText(cardOf(reminder)), /Reminder: this question is still open\./)
    assert.equal((reminder.activity as { replyToId?: string }).replyToId, posted.id)
    assert.equal(posted.updates, 0, 'the card itself is unchanged')
    const res = await fetch(`${rt.url}requests/${q.request_id}/cancel`, {
      method: 'POST',
      headers: { 'x-kasm-runtime-session-token': 'session-token-for-teams-tests' },
    })
    assert.equal(res.status, 200, await res.text())
    await waitFor('the card updated', () => posted.updates === 1)
    assert.match(cardText(cardOf(posted)), /Question closed/)
    assert.match(cardText(cardOf(posted)), /Cancelled/)
    assert.equal(
      cardOf(posted).actions?.some((a) => a.type === 'Action.Execute'),
      false,
    )
    assert.equal(bf.posted(thread).length, 1, 'one reminder')
  })

  test('a handoff pause: its card, updated when the pause ends', async () => {
    const reason = 'a captcha on the login page <at>everyone</at>'
    rt.escalate(reason, 1)
    const posted = await cardAbout('Handoff: ')
    assert.match(cardText(cardOf(posted)), /the agent asks a person to take over/)
    // The runtime's reason is data: a text run, never a mention.
    assert.ok(cardText(cardOf(posted)).includes(reason))
    assert.equal(JSON.stringify(posted.activity).includes('"mention"'), false)
    assert.equal(openUrl(cardOf(posted), 'Open in console').startsWith(`${stack.base}sessions/k1`), true)
    // The pause times out after a second: the card says it ended, and how.
    await waitFor('the handoff card updated', () => posted.updates === 1)
    assert.match(cardText(cardOf(posted)), /Handoff ended \(timeout\)/)
    assert.ok(cardText(cardOf(posted)).includes(reason))
  })

  // Last: it ends the runtime's run.
  test('a run that ends needing a person: its card; the question left open is closed on its card', async () => {
    rt.ask({ title: 'Left open?', fields: CHOICE })
    const open = await cardAbout('Left open?')
    rt.emit('status', { phase: 'done', verdict: 'test-error', outcome: 'failed' })
    rt.closeTrace({ done: true })
    const ended = await cardAbout('Verdict test-error')
    assert.match(cardText(cardOf(ended)), /Verdict test-error, outcome failed/)
    assert.equal(openUrl(cardOf(ended), 'Open in console').startsWith(`${stack.base}sessions/k1`), true)
    await waitFor('the question’s card updated', () => open.updates === 1)
    assert.match(cardText(cardOf(open)), /Run ended before an answer/)
    assert.equal(
      cardOf(open).actions?.some((a) => a.type === 'Action.Execute'),
      false,
    )
  })

  /**
   * A proxy in front of `runtime` that holds every reply (`POST …/messages`) until {@link release}, passing all
   * else through (the event stream included): a runtime slow to take an answer.
   */
  async function holdingProxy(runtime: SimulatedRuntime) {
    const target = new URL(runtime.url)
    const held: (() => void)[] = []
    let holding = true
    const server = http.createServer((req, res) => {
      const forward = () => {
        const up = http.request(
          `${target.origin}${req.url ?? '/'}`,
          { method: req.method, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.pipe(res)
          },
        )
        up.on('error', () => res.destroy())
        req.pipe(up)
      }
      const path = new URL(req.url ?? '/', target.origin).pathname
      if (holding && req.method === 'POST' && path.endsWith('/messages')) held.push(forward)
      else forward()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(resolve))
    })
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${target.pathname}`,
      held: () => held.length,
      release() {
        holding = false
        for (const forward of held.splice(0)) forward()
      },
    }
  }

  test('an answer the runtime takes longer than the invoke may wait for: the clicker is told it is on its way, and every card closes when it lands', async () => {
    const slow = await startSimulatedRuntime({ messagingToken: TOKEN, sessionToken: 'session-token-slow' })
    cleanups.push(() => slow.close())
    const proxy = await holdingProxy(slow)
    await stack.app.sessions.put({
      kasmId: 'k-slow',
      upstream: proxy.url,
      team: 'blue',
      messagingToken: TOKEN,
      source: 'admin',
    })
    const q = slow.ask({ title: 'Restart the slow worker?', fields: CHOICE })
    const posted = await cardAbout('Restart the slow worker?')

    // Teams waits about fifteen seconds for an invoke: the gateway answers after its nine, the reply still held.
    const mine = await click(OLIVIA, posted, 'chrome')
    assert.equal(proxy.held(), 1, 'the reply is still with the runtime')
    assert.match(cardText(mine), /Your answer is on its way to the run: this card changes when it closes\./)
    assert.deepEqual(
      actionsOf(mine).map((a) => a.title),
      ['chrome', 'firefox', 'Open in console', 'I’m on it'],
      'still the question, nothing closed yet',
    )
    assert.equal(posted.updates, 0)

    // The runtime takes it: the reply carries her values, and everyone's card closes naming her.
    proxy.release()
    await waitFor('the shared card closed', () =>
      cardText(cardOf(posted)).includes('Answered by Olivia Operator in Teams · Browser: chrome'),
    )
    const read = async (path: string) =>
      (await (
        await fetch(`${slow.url}${path}`, { headers: { 'x-kasm-runtime-session-token': TOKEN } })
      ).json()) as Record<string, unknown>
    const request = await read(`requests/${q.request_id}`)
    assert.equal(request.state, 'closed')
    assert.deepEqual((await read(`messages/${String(request.reply_id)}`)).values, { browser: 'chrome' })
  })
})
