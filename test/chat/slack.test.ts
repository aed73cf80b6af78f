import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FieldDef } from '../../src/protocol/fields.ts'
import { SIGNATURE_FAILURES_MAX } from '../../src/routes/slack.ts'
import { interactionBody, postInteraction, SIGNING_SECRET, slackSignature } from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import {
  buttons,
  CHANNEL,
  click,
  confirmWithCode,
  ephemeralAfter,
  link,
  linkIn,
  messageAbout,
  OLIVIA,
  OSCAR,
  openLink,
  RITA,
  repliesSent,
  type SlackStack,
  startSlackStack,
  TOKEN,
  textOf,
  threadTexts,
  VICTOR,
} from './helpers.ts'

/**
 * The Slack app against a real gateway, its real OpenID provider, the simulated runtime and Slack's stand-in
 * (test/fixtures/slack-api.ts): what is posted when a question opens, answers from buttons and the modal,
 * who may answer, and every refusal of the Request URL.
 */

const CHOICE: FieldDef[] = [
  { id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox', 'safari'], label: 'Browser' },
]

/** The runtime's record of a request (its state, how it closed, the reply). */
async function runtimeRequest(stack: SlackStack, id: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${stack.rt.url}requests/${id}`, {
    headers: { 'x-kasm-runtime-session-token': TOKEN },
  })
  return (await res.json()) as Record<string, unknown>
}

/** The values of the reply that closed a request, from the runtime. */
async function replyValues(stack: SlackStack, id: string): Promise<unknown> {
  const request = await runtimeRequest(stack, id)
  const res = await fetch(`${stack.rt.url}messages/${String(request.reply_id)}`, {
    headers: { 'x-kasm-runtime-session-token': TOKEN },
  })
  return ((await res.json()) as { values?: unknown }).values
}

/** The runtime's stored replies to a request. */
async function repliesTo(stack: SlackStack, id: string): Promise<unknown[]> {
  const res = await fetch(`${stack.rt.url}messages`, { headers: { 'x-kasm-runtime-session-token': TOKEN } })
  const { messages } = (await res.json()) as { messages: { reply_to?: string }[] }
  return messages.filter((m) => m.reply_to === id)
}

async function metric(stack: SlackStack, series: string): Promise<number> {
  const text = await (await fetch(`${stack.origin}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.split(' ')[1])
}

test('a question opens: one message in the team’s channel with its title, fields and deadline, its choices as buttons and the console link', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({
    title: 'Which browser?',
    help: 'The <b>export</b> & <!channel> more',
    fields: CHOICE,
    deadlineS: 300,
  })
  const message = await messageAbout(stack, 'Which browser?')
  const b = buttons(message)
  assert.deepEqual(Object.keys(b), [
    'krg:choose:0',
    'krg:choose:1',
    'krg:choose:2',
    'krg:claim',
    'krg:console',
  ])
  assert.deepEqual(
    [0, 1, 2].map((i) => (b[`krg:choose:${i}`]?.text as { text?: string } | undefined)?.text),
    ['chrome', 'firefox', 'safari'],
  )
  // The console's deep link opens the session on this question.
  assert.equal(b['krg:console']?.url, `${stack.base}sessions/k1?run=${stack.rt.run}&request=${q.request_id}`)
  const text = textOf(message)
  const deadline = Date.parse(String((await runtimeRequest(stack, q.request_id)).deadline))
  assert.match(
    text,
    new RegExp(
      `Answer by <!date\\^${Math.floor(deadline / 1000)}\\^\\{date_short_pretty\\} at \\{time\\}\\|`,
    ),
  )
  // Whatever the runtime writes is text: no markup, no mention, no channel ping.
  assert.match(text, /The &lt;b&gt;export&lt;\/b&gt; &amp; &lt;!channel&gt; more/)
  assert.match(message.text, /A question is waiting in session k1: Which browser\?/)

  stack.rt.ask({ title: 'Accept the dialog?', fields: [{ id: 'ok', type: 'boolean', required: true }] })
  const yesNo = await messageAbout(stack, 'Accept the dialog?')
  assert.deepEqual(
    Object.values(buttons(yesNo)).map((e) => (e.text as { text: string }).text),
    ['Yes', 'No', 'I’m on it', 'Open in console'],
  )
  stack.rt.ask({
    title: 'How many nights?',
    fields: [{ id: 'nights', type: 'integer', minimum: 1, maximum: 14 }],
  })
  const form = await messageAbout(stack, 'How many nights?')
  assert.deepEqual(Object.keys(buttons(form)), ['krg:answer', 'krg:claim', 'krg:console'])
  assert.match(textOf(form), /\*nights\* \(optional\): a whole number, 1 to 14/)
  // Deliveries to a channel go out in order: the first question got one message, before the others.
  assert.equal(stack.slack.posts(CHANNEL).length, 3)
  assert.ok(stack.slack.of('chat.postMessage').every((c) => c.token?.startsWith('xoxb-')))
})

test('a question Block Kit cannot hold (a file, 101 options, a newer field type) is sent to the console, never a partial form', async (t) => {
  const stack = await startSlackStack(t, { runtime: { futureFieldTypes: ['date'] } })
  const cases: [string, unknown[], RegExp][] = [
    [
      'Upload the receipt',
      [{ id: 'receipt', type: 'attachment', label: 'Receipt' }],
      /“Receipt” asks for a file/,
    ],
    [
      'Pick a country',
      [{ id: 'country', type: 'string', enum: Array.from({ length: 101 }, (_, i) => `c${i}`) }],
      /“country” has more than 100 options/,
    ],
    ['When?', [{ id: 'day', type: 'date' }], /“day” is of a kind Slack cannot show \(date\)/],
  ]
  for (const [title, fields, why] of cases) {
    stack.rt.ask({ title, fields })
    const message = await messageAbout(stack, title)
    // Taken with "I'm on it" all the same: someone may answer it in the console.
    assert.deepEqual(Object.keys(buttons(message)), ['krg:claim', 'krg:console'], title)
    assert.match(textOf(message), why)
    assert.match(textOf(message), /Answer this one in the console/)
  }
})

test('an unlinked user is offered the link; once linked through the IdP, their click closes the question with its value and the message says who', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')

  await click(stack, OLIVIA, message, 'krg:choose:1')
  const prompt = await ephemeralAfter(stack.slack, OLIVIA, 0)
  assert.equal(prompt.args.channel, CHANNEL)
  assert.match(String(prompt.args.text), /Connect your Slack account/)
  const url = linkIn(prompt)
  assert.ok(url.startsWith(`${stack.base}auth/slack-link?t=`), url)
  assert.equal(repliesSent(stack.rt), 0, 'nothing is sent for an unlinked user')

  const { browser, page } = await openLink(url, 'olivia')
  assert.equal(page.url, `${stack.base}auth/slack-link/confirm`)
  // The page names the Slack user, the workspace and the person, and asks.
  assert.match(page.text, /Connect your Slack account/)
  assert.match(page.text, /Slack user: @olivia \(U0OLIVIA1\)/)
  assert.match(page.text, /Slack workspace: krg-tests \(T0TEST001\)/)
  assert.match(page.text, /will be yours: Olivia Operator \(olivia\)/)
  assert.match(page.text, /If you did not ask for this link in Slack yourself, do not go on/)
  assert.equal(browser.cookies.has('krg_session'), false, 'linking starts no cookie session')
  const { done } = await confirmWithCode(stack.slack, OLIVIA, browser, page)
  assert.equal(done.status, 200)
  assert.match(done.text, /Your Slack account is connected/)

  await click(stack, OLIVIA, message, 'krg:choose:1')
  await waitFor(
    'the question closed on the runtime',
    async () => (await runtimeRequest(stack, q.request_id)).state === 'closed',
  )
  assert.deepEqual(await replyValues(stack, q.request_id), { browser: 'firefox' })
  await waitFor('the message updated', () => message.updates === 1)
  assert.deepEqual(Object.keys(buttons(message)), ['krg:console'], 'the answer buttons are gone')
  assert.match(textOf(message), /Question closed/)
  assert.match(textOf(message), /Answered by Olivia Operator in Slack · Browser: firefox/)
  assert.deepEqual(await threadTexts(stack.slack, message.ts), [
    'Answered by Olivia Operator in Slack · Browser: firefox',
  ])

  // The reply went through the console's path: audited as the person, with where it came from.
  const records = await stack.app.audit.recent({ limit: 50, kasmId: 'k1' })
  const reply = records.find((r) => r.route === 'messages' && r.replyTo === q.request_id)
  assert.ok(reply, JSON.stringify(records))
  assert.deepEqual(
    [reply.sub, reply.name, reply.via, reply.status, reply.upstreamStatus, reply.team],
    ['olivia', 'Olivia Operator', 'slack', 202, 202, 'blue'],
  )
  const linked = (await stack.app.audit.recent({ limit: 50 })).find((r) => r.route === 'auth/slack-link')
  assert.deepEqual([linked?.sub, linked?.action, linked?.status], ['olivia', 'link', 200])
  // The token reached the runtime as on every write, and no value or token reached the audit log.
  assert.ok(!JSON.stringify(records).includes('firefox'))
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="button",outcome="unlinked"}'), 1)
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="button",outcome="answered"}'), 1)
  assert.equal(
    await metric(stack, 'krg_notifications_sent_total{type="request.closed",target="slack:C0BLUE001"}'),
    1,
  )
  // The team report counts it as answered through Slack.
  await waitFor(
    'the report counted the answer',
    async () => (await metric(stack, 'krg_questions_closed_total{team="blue",closed_by="reply"}')) === 1,
  )
  assert.equal(await metric(stack, 'krg_question_answer_seconds_count{team="blue",via="slack",step="0"}'), 1)
})

test('the modal: every field type Block Kit can hold, answered, and the values reach the run as typed', async (t) => {
  const stack = await startSlackStack(t)
  const countries = Array.from({ length: 15 }, (_, i) => `country-${i}`)
  const cities = Array.from({ length: 20 }, (_, i) => `city-${i}`)
  const fields = [
    { id: 'name', type: 'string', required: true, max_length: 40, label: 'Name' },
    { id: 'notes', type: 'string', max_length: 500, label: 'Notes', help: 'Anything else' },
    { id: 'browser', type: 'string', enum: ['chrome', 'firefox', 'safari'], label: 'Browser' },
    { id: 'city', type: 'string', enum: cities, label: 'City' },
    { id: 'nights', type: 'integer', minimum: 1, maximum: 14, required: true, label: 'Nights' },
    { id: 'price', type: 'number', minimum: 0, label: 'Price' },
    { id: 'agree', type: 'boolean', required: true, label: 'Agree' },
    { id: 'tags', type: 'string[]', enum: ['a', 'b', 'c'], label: 'Tags' },
    { id: 'countries', type: 'string[]', enum: countries, max_items: 3, label: 'Countries' },
  ]
  // Linked first, on a question of its own.
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')

  const q = stack.rt.ask({ title: 'Book the trip', help: 'Fill in everything', fields })
  const message = await messageAbout(stack, 'Book the trip')
  await click(stack, OLIVIA, message, 'krg:answer')
  const opened = await waitFor('views.open', () => stack.slack.of('views.open')[0])
  const view = opened.args.view as {
    title: { text: string }
    blocks: Record<string, unknown>[]
    callback_id: string
  }
  assert.equal(view.callback_id, 'krg:answer')
  const inputs = Object.fromEntries(
    view.blocks.filter((b) => b.type === 'input').map((b) => [b.block_id, b as Record<string, unknown>]),
  )
  const element = (id: string) => inputs[`f:${id}`]?.element as Record<string, unknown>
  assert.deepEqual(
    Object.keys(inputs),
    fields.map((f) => `f:${f.id}`),
  )
  assert.deepEqual(
    fields.map((f) => element(f.id).type),
    [
      'plain_text_input',
      'plain_text_input',
      'radio_buttons',
      'static_select',
      'number_input',
      'number_input',
      'radio_buttons',
      'checkboxes',
      'multi_static_select',
    ],
  )
  assert.deepEqual([element('name').multiline, element('name').max_length], [false, 40])
  assert.deepEqual([element('notes').multiline, element('notes').max_length], [true, 500])
  assert.deepEqual(
    [element('nights').is_decimal_allowed, element('nights').min_value, element('nights').max_value],
    [false, '1', '14'],
  )
  assert.equal(element('price').is_decimal_allowed, true)
  assert.equal(element('agree').initial_option, undefined, 'nothing preselected: untouched is never "No"')
  assert.equal(element('countries').max_selected_items, 3)
  assert.deepEqual([inputs['f:name']?.optional, inputs['f:notes']?.optional], [false, true])

  const state = {
    'f:name': { v: { type: 'plain_text_input', value: 'Olivia' } },
    'f:notes': { v: { type: 'plain_text_input', value: null } },
    'f:browser': { v: { type: 'radio_buttons', selected_option: { value: '1' } } },
    'f:city': { v: { type: 'static_select', selected_option: { value: '17' } } },
    'f:nights': { v: { type: 'number_input', value: '3' } },
    'f:price': { v: { type: 'number_input', value: '12.5' } },
    'f:agree': { v: { type: 'radio_buttons', selected_option: { value: 'false' } } },
    'f:tags': { v: { type: 'checkboxes', selected_options: [{ value: '0' }, { value: '2' }] } },
    'f:countries': { v: { type: 'multi_static_select', selected_options: [{ value: '11' }] } },
  }
  const submitted = await postInteraction(stack.interactions, stack.slack.submit(OLIVIA, state))
  assert.equal(submitted.status, 200)
  assert.deepEqual(submitted.json, { response_action: 'clear' })
  assert.deepEqual(await replyValues(stack, q.request_id), {
    name: 'Olivia',
    browser: 'firefox',
    city: 'city-17',
    nights: 3,
    price: 12.5,
    agree: false,
    tags: ['a', 'c'],
    countries: ['country-11'],
  })
  await waitFor('the message updated', () => message.updates === 1)
  assert.match(textOf(message), /Answered by Olivia Operator in Slack · Name: Olivia · Browser: firefox/)
  assert.match(textOf(message), /Agree: No · Tags: a, c/)
})

test('a modal answer the fields refuse gets field errors in the acknowledgement, and nothing is sent', async (t) => {
  const stack = await startSlackStack(t)
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')
  const sent = repliesSent(stack.rt)
  stack.rt.ask({
    title: 'Which code?',
    fields: [
      { id: 'code', type: 'string', pattern: '^[A-Z]{3}$', required: true, label: 'Code' },
      { id: 'why', type: 'string', required: true },
    ],
  })
  await click(stack, OLIVIA, await messageAbout(stack, 'Which code?'), 'krg:answer')
  await waitFor('views.open', () => stack.slack.of('views.open').length === 1)
  const res = await postInteraction(
    stack.interactions,
    stack.slack.submit(OLIVIA, {
      'f:code': { v: { type: 'plain_text_input', value: 'abc' } },
      'f:why': { v: { type: 'plain_text_input', value: '' } },
    }),
  )
  assert.deepEqual(res.json, {
    response_action: 'errors',
    errors: { 'f:code': 'does not match ^[A-Z]{3}$', 'f:why': 'required' },
  })
  assert.equal(repliesSent(stack.rt), sent, 'the gateway checked it before sending anything')
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="modal_submit",outcome="invalid"}'), 1)
})

test("the runtime's 422 comes back as the modal's field errors", async (t) => {
  // The runtime redacts what looks like a secret before checking: the gateway's own check cannot see that.
  const stack = await startSlackStack(t, { runtime: { redactPatterns: ['secret-\\d+'] } })
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')
  const q = stack.rt.ask({
    title: 'Which key?',
    fields: [{ id: 'key', type: 'string', pattern: '^[a-z]+-\\d+$', required: true }],
  })
  await click(stack, OLIVIA, await messageAbout(stack, 'Which key?'), 'krg:answer')
  await waitFor('views.open', () => stack.slack.of('views.open').length === 1)
  const res = await postInteraction(
    stack.interactions,
    stack.slack.submit(OLIVIA, { 'f:key': { v: { type: 'plain_text_input', value: 'secret-42' } } }),
  )
  assert.equal(res.status, 200)
  assert.deepEqual(res.json, {
    response_action: 'errors',
    errors: { 'f:key': 'does not match ^[a-z]+-\\d+$' },
  })
  assert.equal((await runtimeRequest(stack, q.request_id)).state, 'open', 'the question stays open')
  const record = (await stack.app.audit.recent({ limit: 20 })).find((r) => r.replyTo === q.request_id)
  assert.deepEqual([record?.status, record?.via], [422, 'slack'])
})

test('a viewer is told they may only watch, an operator of another team that they may not answer; nothing is sent', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')
  await link(stack, VICTOR, message, 'victor', 'krg:choose:0')
  await link(stack, RITA, message, 'rita', 'krg:choose:0')

  const v = stack.slack.ephemerals(VICTOR.id).length
  await click(stack, VICTOR, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, VICTOR, v)).args.text),
    /You may only watch this session: answering needs the operator role in team blue/,
  )
  const r = stack.slack.ephemerals(RITA.id).length
  await click(stack, RITA, message, 'krg:choose:0')
  assert.match(
    String((await ephemeralAfter(stack.slack, RITA, r)).args.text),
    /You may not answer questions of this session/,
  )

  // "Answer…" is refused the same way, before any modal opens.
  stack.rt.ask({ title: 'How many?', fields: [{ id: 'n', type: 'integer' }] })
  const form = await messageAbout(stack, 'How many?')
  await click(stack, VICTOR, form, 'krg:answer')
  assert.match(String((await ephemeralAfter(stack.slack, VICTOR, v + 1)).args.text), /You may only watch/)
  assert.equal(stack.slack.of('views.open').length, 0)
  assert.equal(repliesSent(stack.rt), 0)
  assert.equal((await runtimeRequest(stack, q.request_id)).state, 'open')
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="button",outcome="viewer"}'), 1)
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="button",outcome="team"}'), 1)
})

test('two people click at once: one reply, and the other is told, only them, who answered first and what', async (t) => {
  const stack = await startSlackStack(t)
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  const warm = await messageAbout(stack, 'Warm up')
  await link(stack, OLIVIA, warm, 'olivia', 'krg:choose:0')
  await link(stack, OSCAR, warm, 'oscar', 'krg:choose:0')

  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')
  // Clicks that will arrive once the message says the question closed.
  const late = {
    [OLIVIA.id]: stack.slack.click(OLIVIA, message, 'krg:choose:1'),
    [OSCAR.id]: stack.slack.click(OSCAR, message, 'krg:choose:1'),
  }
  const before = {
    olivia: stack.slack.ephemerals(OLIVIA.id).length,
    oscar: stack.slack.ephemerals(OSCAR.id).length,
  }
  const [a, b] = await Promise.all([
    postInteraction(stack.interactions, stack.slack.click(OLIVIA, message, 'krg:choose:0')),
    postInteraction(stack.interactions, stack.slack.click(OSCAR, message, 'krg:choose:2')),
  ])
  assert.deepEqual([a.status, b.status], [200, 200])
  await waitFor(
    'the loser is told',
    () =>
      stack.slack.ephemerals(OLIVIA.id).length > before.olivia ||
      stack.slack.ephemerals(OSCAR.id).length > before.oscar,
  )
  assert.equal((await repliesTo(stack, q.request_id)).length, 1, 'one reply')
  const values = (await replyValues(stack, q.request_id)) as { browser: string }
  const [winner, loser] =
    values.browser === 'chrome' ? ['Olivia Operator', OSCAR] : ['Oscar Operator', OLIVIA]
  const told = stack.slack.ephemerals(loser.id).at(-1)
  assert.match(
    String(told?.args.text),
    new RegExp(`Someone answered first\\. Answered by ${winner} in Slack · Browser: ${values.browser}`),
  )
  await waitFor('the message updated', () => message.updates === 1)
  assert.match(textOf(message), new RegExp(`Answered by ${winner} in Slack`))
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="button",outcome="taken"}'), 1)
  // Later, the message (on any replica) says who it was: nothing is asked of the runtime.
  await threadTexts(stack.slack, message.ts)
  const sent = repliesSent(stack.rt)
  const n = stack.slack.ephemerals(loser.id).length
  assert.equal((await postInteraction(stack.interactions, late[loser.id] ?? {})).status, 200)
  assert.match(
    String((await ephemeralAfter(stack.slack, loser, n)).args.text),
    new RegExp(`Someone answered first\\. Answered by ${winner} in Slack · Browser: ${values.browser}`),
  )
  assert.equal(repliesSent(stack.rt), sent)
})

test('a double click is one reply; a second choice by the same person is told they answered already', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')
  await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  // The runtime's events wait, so the message stays open while she clicks: what she is told comes from the
  // runtime's answers (200 for the same reply again, 409 for another), not from the closing.
  stack.rt.stallStreams(true)
  const before = stack.slack.ephemerals(OLIVIA.id).length
  await Promise.all([
    click(stack, OLIVIA, message, 'krg:choose:1'),
    click(stack, OLIVIA, message, 'krg:choose:1'),
  ])
  const counted = async (outcome: string) =>
    metric(stack, `krg_slack_interactions_total{type="button",outcome="${outcome}"}`)
  await waitFor(
    'both clicks handled',
    async () => (await counted('answered')) === 1 && (await counted('repeated')) === 1,
  )
  assert.equal((await repliesTo(stack, q.request_id)).length, 1)
  assert.equal(stack.slack.ephemerals(OLIVIA.id).length, before, 'a repeat is not worth a message')
  await click(stack, OLIVIA, message, 'krg:choose:2')
  assert.match(
    String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text),
    /You answered this question already/,
  )
  assert.deepEqual(await replyValues(stack, q.request_id), { browser: 'firefox' })
  stack.rt.stallStreams(false)
  await waitFor('the message updated', () => message.updates === 1)
})

test('a question that timed out, was cancelled or whose run ended: the message says so for everyone, in the thread too', async (t) => {
  const stack = await startSlackStack(t)
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')
  const sent = repliesSent(stack.rt)

  const timeout = stack.rt.ask({ title: 'Quick one', fields: CHOICE, deadlineS: 1 })
  const quick = await messageAbout(stack, 'Quick one')
  // A click that arrives after the question closed.
  const late = stack.slack.click(OLIVIA, quick, 'krg:choose:0')
  await waitFor('timed out', () => quick.updates === 1)
  assert.match(textOf(quick), /Timed out: nobody answered in time/)
  assert.deepEqual(Object.keys(buttons(quick)), ['krg:console'])
  assert.deepEqual(await threadTexts(stack.slack, quick.ts), ['Timed out: nobody answered in time'])
  assert.equal((await runtimeRequest(stack, timeout.request_id)).closed_by, 'timeout')
  const before = stack.slack.ephemerals(OLIVIA.id).length
  assert.equal((await postInteraction(stack.interactions, late)).status, 200)
  assert.match(
    String((await ephemeralAfter(stack.slack, OLIVIA, before)).args.text),
    /This question is no longer open/,
  )
  assert.equal(repliesSent(stack.rt), sent, 'nothing sent for a closed question')

  const cancelled = stack.rt.ask({ title: 'Cancel me', fields: CHOICE })
  const second = await messageAbout(stack, 'Cancel me')
  const res = await fetch(`${stack.rt.url}requests/${cancelled.request_id}/cancel`, {
    method: 'POST',
    headers: { 'x-kasm-runtime-session-token': 'session-token-for-slack-tests' },
  })
  assert.equal(res.status, 200)
  await waitFor('cancelled', () => second.updates === 1)
  assert.match(textOf(second), /Cancelled/)

  stack.rt.ask({ title: 'Left open', fields: CHOICE })
  const third = await messageAbout(stack, 'Left open')
  stack.rt.newRun()
  await waitFor('run ended', () => third.updates === 1)
  assert.match(textOf(third), /Run ended before an answer/)
  assert.deepEqual(await threadTexts(stack.slack, third.ts), ['Run ended before an answer'])
})

test('the Request URL refuses a payload badly signed, unsigned, stale, from the future, replayed or not a payload, and nothing is sent', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')
  await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  const ephemerals = stack.slack.ephemerals(OLIVIA.id).length
  const payload = stack.slack.click(OLIVIA, message, 'krg:choose:1')
  const now = Math.floor(Date.now() / 1000)
  const refused = async (options: Parameters<typeof postInteraction>[2], status: number, error: string) => {
    const res = await postInteraction(stack.interactions, payload, options)
    assert.equal(res.status, status, `${JSON.stringify(options)}: ${res.text}`)
    assert.equal((res.json as { error: string }).error, error)
  }
  await refused({ secret: 'another-apps-signing-secret-0000' }, 401, 'slack_signature_invalid')
  await refused({ signature: null }, 401, 'slack_signature_invalid')
  await refused({ signature: 'v0=not-hex' }, 401, 'slack_signature_invalid')
  await refused({ signature: `v1=${'0'.repeat(64)}` }, 401, 'slack_signature_invalid')
  // Past the five minutes either way by a minute, read at the moment of sending: `now + 301` computed earlier
  // fell inside the window once a loaded run took a second or more to get here (and was then accepted).
  const seconds = () => Math.floor(Date.now() / 1000)
  await refused({ timestamp: seconds() - 360 }, 401, 'slack_request_stale')
  await refused({ timestamp: seconds() + 360 }, 401, 'slack_request_stale')
  // A body changed after signing.
  const body = interactionBody(payload)
  await refused(
    {
      body: body.replace('krg%3Achoose%3A1', 'krg%3Achoose%3A2'),
      signature: slackSignature(SIGNING_SECRET, now, body),
      timestamp: now,
    },
    401,
    'slack_signature_invalid',
  )
  // Signed, but no payload in it.
  await refused({ body: 'payload=%7Bnot-json' }, 400, 'bad_request')
  const json = await fetch(stack.interactions, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  })
  assert.equal(json.status, 415)
  assert.equal(repliesSent(stack.rt), 0, 'nothing refused was sent')
  assert.equal(stack.slack.ephemerals(OLIVIA.id).length, ephemerals)

  // The same signed request twice: the first is answered, the replay refused.
  const signed = { timestamp: now, signature: slackSignature(SIGNING_SECRET, now, body), body }
  assert.equal((await postInteraction(stack.interactions, payload, signed)).status, 200)
  await waitFor('answered', async () => (await runtimeRequest(stack, q.request_id)).state === 'closed')
  await refused(signed, 409, 'slack_request_replayed')
  assert.equal(repliesSent(stack.rt), 1)
  assert.equal(
    await metric(stack, 'krg_slack_interactions_total{type="unverified",outcome="bad_signature"}'),
    5,
  )
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="unverified",outcome="stale"}'), 2)
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="unverified",outcome="replayed"}'), 1)
})

test('a delegation header from the network is no credential, whatever it holds', async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const operator = stack.app.people.fromChatLink({
    chat: 'slack',
    workspace: 'T0TEST001',
    user: 'U0OLIVIA1',
    sub: 'olivia',
    roles: ['operator'],
    teams: ['*'],
    createdAt: Date.now(),
    expiresAt: Date.now() + 60_000,
    state: 'active',
  })
  // Even a value minted just now for a real in-process request.
  const value = stack.app.people.delegate(operator)
  const res = await fetch(`${stack.origin}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-krg-delegation': value },
    body: JSON.stringify({
      run: stack.rt.run,
      key: 'k',
      reply_to: q.request_id,
      revision: 1,
      values: { browser: 'chrome' },
    }),
  })
  assert.equal(res.status, 401)
  assert.equal(((await res.json()) as { error: string }).error, 'unauthenticated')
  assert.equal(repliesSent(stack.rt), 0)
})

test('Slack’s address is not held to the budget of requests without a credential: its signature is the credential', async (t) => {
  const stack = await startSlackStack(t, { env: { GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: '3' } })
  // Every team's clicks arrive from Slack's few addresses: far more than one person's anonymous budget.
  for (let n = 0; n < 8; n++) {
    const res = await postInteraction(stack.interactions, { type: 'view_closed', n })
    assert.equal(res.status, 200, `interaction ${n}: ${res.text}`)
  }
  // A forged one is still refused by its signature, not let through by the exemption.
  const forged = await postInteraction(stack.interactions, { type: 'view_closed' }, { signature: null })
  assert.equal(forged.status, 401)
  // The same address without a credential elsewhere is still limited.
  const statuses: number[] = []
  for (let n = 0; n < 4; n++) {
    const res = await fetch(`${stack.origin}/desktop/k1/mcp/messages`, { method: 'POST', body: '{}' })
    statuses.push(res.status)
  }
  assert.deepEqual(statuses, [401, 401, 401, 429])
  assert.equal(await metric(stack, 'krg_slack_interactions_total{type="other",outcome="ignored"}'), 8)
})

test('failed signatures from one address are answered 429 past the limit, and a valid request from it is still handled', async (t) => {
  const stack = await startSlackStack(t)
  const forge = () =>
    postInteraction(stack.interactions, { type: 'view_closed' }, { secret: 'not-the-secret' })
  const statuses: number[] = []
  for (let n = 0; n < SIGNATURE_FAILURES_MAX; n++) statuses.push((await forge()).status)
  assert.deepEqual(new Set(statuses), new Set([401]), 'up to the limit, each one is refused as unsigned')
  const limited = await fetch(stack.interactions, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: interactionBody({ type: 'view_closed' }),
  })
  assert.equal(limited.status, 429)
  assert.equal(((await limited.json()) as { error: string }).error, 'slack_signature_rate_limited')
  const wait = Number(limited.headers.get('retry-after'))
  assert.ok(wait > 0 && wait <= 300, `Retry-After ${wait}`)
  assert.equal((await forge()).status, 429)
  // Slack's addresses are shared by every app: a request Slack signed for this app is never refused.
  const valid = await postInteraction(stack.interactions, { type: 'view_closed' })
  assert.equal(valid.status, 200, valid.text)
  assert.equal(
    await metric(stack, 'krg_slack_interactions_total{type="unverified",outcome="rate_limited"}'),
    2,
  )
  assert.equal(
    await metric(stack, 'krg_slack_interactions_total{type="unverified",outcome="bad_signature"}'),
    SIGNATURE_FAILURES_MAX,
  )
})
