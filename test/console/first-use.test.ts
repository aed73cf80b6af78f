// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { assertAccessible, sharedChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { call } from '../overview/helpers.ts'
import {
  addRuntime,
  addSharedRuntime,
  consoleGatewayPerFile,
  settled,
  signIn,
  startConsoleGateway,
  TOKEN,
  until,
} from './helpers.ts'

/** What a new user tripped over in the console (issue 37): one browser for the whole file. */

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }
/** The file's one gateway, for the tests that need nothing of their own from it: each has sessions of its own. */
const gateway = consoleGatewayPerFile({ people: [carol] })

const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1366, height: 800 }

/** One Chromium for the file's tests (the shard's, when it shares a process). */
const chromium = sharedChromium()

/** The page's active element's text. */
function focused(page: Page): Promise<unknown> {
  return page.evaluate('document.activeElement?.textContent')
}

test('an answer that leaves every field empty asks first; an optional field says so, and its hint promises only what is checked', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-empty', 'blue')
  rt.emit('status', { phase: 'agentic' })
  // As the demo's "Which tags…?": one optional list, with a least number of items if any is given.
  const q = rt.ask({
    title: 'Which labels go on the invoice?',
    fields: [{ id: 'labels', type: 'string[]', enum: ['urgent', 'partner', 'paid'], min_items: 2 }],
  })
  const page = await signIn(t, b, gw, carol, {
    path: `/sessions/k-empty?request=${q.request_id}`,
    reuse: true,
  })
  const card = page.locator(`[data-request="${q.request_id}"]`)
  await card.getByRole('button', { name: 'Answer' }).waitFor()
  // Left empty, the runtime takes it (min_items applies to a list given): the hint says exactly that.
  assert.equal(await card.locator('.hint').textContent(), 'optional; choose none, or at least 2')
  const posts = () => rt.received.filter((r) => r.method === 'POST' && r.url.startsWith('/messages')).length

  // Nothing ticked: it asks first, the keyboard on the answer that sends nothing; Escape goes back.
  await card.getByRole('button', { name: 'Answer' }).click()
  const confirm = card.getByRole('group', { name: /Send an empty answer\?/ })
  await confirm.waitFor()
  assert.equal(await focused(page), 'Go back')
  assert.equal(await card.getByRole('button', { name: 'Answer' }).isVisible(), false)
  await settled(page)
  await assertAccessible(page, 'the empty answer’s confirmation')
  await page.keyboard.press('Escape')
  assert.equal(await confirm.isVisible(), false)
  assert.equal(await focused(page), 'Answer')
  // Ticking a box answers the question: the Answer button is back.
  await card.getByRole('button', { name: 'Answer' }).click()
  await confirm.waitFor()
  await card.getByLabel('partner').check()
  assert.equal(await confirm.isVisible(), false)
  await card.getByRole('button', { name: 'Answer' }).waitFor()
  await card.getByLabel('partner').uncheck()
  assert.equal(posts(), 0, 'nothing sent before the person says so')

  // Sent empty only when the person confirms it.
  await card.getByRole('button', { name: 'Answer' }).click()
  await confirm.getByRole('button', { name: 'Yes, send it empty' }).click()
  await card.locator('text=Answered by Carol').waitFor()
  assert.equal(posts(), 1)
  const stored = (await (await fetch(`${rt.url}messages`)).json()) as {
    messages: { reply_to?: string; values?: Record<string, unknown> }[]
  }
  assert.deepEqual(stored.messages.find((m) => m.reply_to === q.request_id)?.values, {})
  await page.context().close()
})

test('“I’m done, finish” asks first as Stop does, and Escape cancels it', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-finish', 'blue', { escalationPauseS: 600 })
  rt.emit('status', { phase: 'agentic' })
  rt.escalate('the approval needs a second factor')
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k-finish#inbox', reuse: true })
  const actions = () => rt.received.filter((r) => r.method === 'POST' && r.url.startsWith('/actions')).length
  const finish = page.getByRole('button', { name: 'I’m done, finish' })
  await finish.click()
  const confirm = page.getByRole('group', { name: /Finish the handoff\?/ })
  await confirm.locator('text=the agent does not resume').waitFor()
  assert.equal(await focused(page), 'Not yet')
  assert.equal(await finish.isVisible(), false)
  await settled(page)
  await assertAccessible(page, 'the handoff’s confirmation')
  await page.keyboard.press('Escape')
  assert.equal(await confirm.isVisible(), false)
  assert.equal(await focused(page), 'I’m done, finish')
  assert.equal(actions(), 0, 'nothing sent before the person confirms')

  await finish.click()
  await confirm.getByRole('button', { name: 'Yes, finish' }).click()
  await page.waitForSelector('.controls .form-status >> text=/^Handed back by Carol after \\d+ s/')
  assert.equal(actions(), 1)
  await page.context().close()
})

test('“Not sent” over a limit says the limit and the size, and keeps the text', async (t) => {
  const b = await chromium(t)
  const gw = await startConsoleGateway(t, { people: [carol], env: { GATEWAY_MAX_JSON_BYTES: '2048' } })
  const rt = await addRuntime(t, gw, 'k1', 'blue', { inboxMessageChars: 1000 })
  rt.emit('status', { phase: 'agentic' })
  const q = rt.ask({ title: 'Why?', fields: [{ id: 'why', type: 'string', label: 'Why' }] })
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k1#inbox' })
  const status = page.locator('.compose .form-status')
  // The page sends only once it knows the run (the stream's first lines); its question comes after them. A loaded
  // run pressed Ctrl+Enter before that, and nothing was sent.
  const card = page.locator(`[data-request="${q.request_id}"]`)
  await card.waitFor()

  // Over the gateway's body limit (2 KB here): the size of what was sent against the limit, in bytes.
  const long = 'x'.repeat(3000)
  await page.fill('#compose-text', long)
  await page.press('#compose-text', 'Control+Enter')
  await status.locator('text=/^Not sent: the message is 3 KB, over the 2 KB limit\\./').waitFor()
  assert.equal(await page.inputValue('#compose-text'), long, 'the text is kept')

  // Over the run's own limit on a message's text (1000 characters here): in characters.
  const chars = 'y'.repeat(1500)
  await page.fill('#compose-text', chars)
  await page.press('#compose-text', 'Control+Enter')
  await status
    .locator('text=/^Not sent: the message is 1500 characters, over the run’s limit of 1000\\./')
    .waitFor()
  assert.equal(await page.inputValue('#compose-text'), chars)

  // An answer over the gateway's limit says the same.
  await card.getByLabel('Why').fill(long)
  await card.getByRole('button', { name: 'Answer' }).click()
  await card.locator('.form-status >> text=/^Not sent: the answer is 3 KB, over the 2 KB limit\\./').waitFor()
  assert.equal(await card.getByLabel('Why').inputValue(), long)
  await page.context().close()
})

test('a stopped run’s outcome stays in the Inbox when the next run starts, until the person dismisses it', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-previous', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const first = rt.run
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k-previous#inbox', reuse: true })
  await page.getByRole('button', { name: 'Stop the agent' }).waitFor()

  // Olivia stops it from elsewhere.
  const olivia = await bearer({ sub: 'olivia', name: 'Olivia', roles: ['operator'], teams: ['blue'] })
  const stop = await call(`${gw.url}/desktop/k-previous/mcp/actions`, 'POST', olivia, {
    run: first,
    key: 'olivia-stop',
    action: 'stop',
  })
  assert.equal(stop.status, 202)
  await page.waitForSelector('.controls .form-status >> text=/^Stopped by Olivia at /')
  rt.emit('status', { phase: 'done', verdict: 'inconclusive', outcome: 'stopped' })
  rt.closeTrace({ done: true })
  await page.waitForSelector('.controls .form-status >> text=The run ended: inconclusive (stopped).')

  // The next run starts and goes on: what happened to the last one is still there.
  rt.newRun()
  rt.emit('status', { phase: 'agentic' })
  await page.waitForSelector(`.run-start >> text=${rt.run}`, { state: 'attached' })
  await page.getByRole('button', { name: 'Stop the agent' }).waitFor()
  for (let i = 1; i <= 5; i++) rt.emit('step', { n: i, action: `click(${i})`, result: 'ok' })
  await until(page, "document.querySelectorAll('.timeline .step').length >= 5")
  await settled(page)
  const previous = page.locator('.previous-run')
  assert.match(
    (await previous.textContent()) ?? '',
    /^The previous run: Stopped by Olivia at .+: the agent’s loop has exited\. The run ended: inconclusive \(stopped\)\.Dismiss$/,
  )
  assert.equal(await previous.isVisible(), true)
  assert.equal(await page.locator('.controls .form-status').textContent(), '', 'the new run has no outcome')
  await assertAccessible(page, 'the previous run’s outcome')

  // Dismissed: gone, and the keyboard on what the controls offer now.
  await previous.getByRole('button', { name: 'Dismiss' }).click()
  assert.equal(await previous.isVisible(), false)
  assert.equal(await focused(page), 'Stop the agent')
  await page.context().close()
})

test('on a phone the message box comes before the earlier questions and no keyboard shortcut is offered', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-phone', 'blue')
  rt.emit('status', { phase: 'agentic' })
  // Earlier questions, answered already, and one still open.
  for (let i = 1; i <= 3; i++) {
    const q = rt.ask({ title: `Go on ${i}?`, fields: [{ id: 'ok', type: 'boolean', required: true }] })
    const res = await fetch(`${rt.url}messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-kasm-runtime-session-token': TOKEN },
      body: JSON.stringify({
        run: rt.run,
        key: `a${i}`,
        reply_to: q.request_id,
        revision: 1,
        values: { ok: true },
      }),
    })
    assert.equal(res.status, 202)
  }
  rt.ask({ title: 'Which one?', fields: [{ id: 'which', type: 'string', required: true, label: 'Which' }] })
  const top = (page: Page, selector: string) =>
    page.evaluate(
      `document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect().top`,
    ) as Promise<number>
  const left = (page: Page, selector: string) =>
    page.evaluate(
      `document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect().left`,
    ) as Promise<number>

  const phone = await signIn(t, b, gw, carol, {
    viewport: PHONE,
    path: '/sessions/k-phone#inbox',
    reuse: true,
  })
  await until(phone, "document.querySelectorAll('.questions.closed .question').length === 3")
  await settled(phone)
  assert.equal(await phone.locator('.keys-hint').isVisible(), false, 'no Ctrl+Enter on a phone')
  await phone.locator('#compose-hint >> text=The agent reads it before its next model call.').waitFor()
  const compose = await top(phone, '.compose')
  assert.ok(compose < (await top(phone, '.questions.closed')), 'the message box above the earlier questions')
  assert.ok(compose > (await top(phone, '.questions:not(.closed)')), 'and below what waits for a person')
  // The keyboard goes the same way as the eye.
  const order = (await phone.evaluate(
    "[...document.querySelectorAll('#compose-text, .questions.closed .question')].map((e) => e.id || 'earlier')",
  )) as string[]
  assert.equal(order[0], 'compose-text')
  await assertAccessible(phone, 'the Inbox on a phone')
  await phone.context().close()

  // A wide screen: the shortcut is said, and two columns (earlier questions under what waits).
  const desktop = await signIn(t, b, gw, carol, {
    viewport: DESKTOP,
    path: '/sessions/k-phone#inbox',
    reuse: true,
  })
  await until(desktop, "document.querySelectorAll('.questions.closed .question').length === 3")
  await settled(desktop)
  assert.equal(await desktop.locator('.keys-hint').isVisible(), true)
  assert.ok((await left(desktop, '.compose')) > (await left(desktop, '.questions.closed')))
  assert.ok((await top(desktop, '.compose')) < (await top(desktop, '.questions.closed')))
  const controls = await desktop.evaluate(
    "document.querySelector('.controls').getBoundingClientRect().bottom",
  )
  const earlier = await top(desktop, '.inbox-earlier')
  assert.ok(
    (earlier as number) - (controls as number) < 60,
    'the earlier questions follow what waits, not the conversation',
  )
  await desktop.context().close()
})
