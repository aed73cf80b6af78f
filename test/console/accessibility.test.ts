// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import type { Page } from 'playwright-core'
import { assertAccessible, sharedChromium } from '../helpers/chromium.ts'
import {
  addSharedRuntime,
  type ConsoleGateway,
  consoleGatewayPerFile,
  settled,
  signIn,
  TOKEN,
  until,
} from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue', 'red'] }
/** The file's one gateway (it knows the Kasm origin, for the viewer's link): each test has sessions of its own. */
const gateway = consoleGatewayPerFile({
  people: [carol],
  env: { GATEWAY_KASM_PUBLIC_URL: 'https://kasm.example.test' },
})

const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

/** A session with something in every part of the page: a run, a step, logs, a screenshot, questions, a message. */
async function busySessions(t: TestContext, gw: ConsoleGateway) {
  const rt = await addSharedRuntime(t, gw, 'k-blue', 'blue', { futureFieldTypes: ['date'] })
  rt.emit('info', { run_id: rt.run, app: 'expenses', goal: 'File the March report', agentic: true })
  rt.emit('status', { phase: 'agentic' })
  rt.emit('step', { n: 1, action: 'click(text="New report")', result: 'form opened', duration_ms: 320 })
  rt.emit('screenshot', {
    file: 'screenshots/0001-click.png',
    step: 1,
    label: 'an empty report',
    width: 64,
    height: 40,
  })
  rt.emit('log', { level: 'warn', msg: 'the receipt is blurry' })
  rt.emit('log', { level: 'error', msg: 'upload failed once' })
  rt.ask({
    title: 'Which cost centre?',
    fields: [
      { id: 'cc', type: 'string', enum: ['CC-100', 'CC-200'], required: true, label: 'Cost centre' },
      { id: 'region', type: 'string', enum: ['a', 'b', 'c', 'd', 'e'], label: 'Region' },
      { id: 'nights', type: 'integer', minimum: 0, maximum: 14, label: 'Nights' },
      { id: 'amount', type: 'number', label: 'Amount' },
      { id: 'ok', type: 'boolean', label: 'Submit anyway' },
      { id: 'tags', type: 'string[]', enum: ['x', 'y'], label: 'Tags' },
      { id: 'receipt', type: 'attachment', accept: ['image/*'], label: 'Receipt' },
      { id: 'note', type: 'string', max_length: 500, label: 'Note' },
    ],
  })
  rt.ask({ title: 'When?', fields: [{ id: 'when', type: 'date' }] })
  // Already answered: the card of an earlier question, with who answered and the reply's state.
  const earlier = rt.ask({
    title: 'Go on?',
    fields: [{ id: 'ok', type: 'boolean', required: true, label: 'Go on' }],
  })
  await fetch(`${rt.url}messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-kasm-runtime-session-token': TOKEN },
    body: JSON.stringify({
      run: rt.run,
      key: 'earlier',
      reply_to: earlier.request_id,
      revision: 1,
      values: { ok: true },
    }),
  })
  for (let i = 2; i <= 60; i++) rt.emit('step', { n: i, action: `type(${i})`, result: 'ok', duration_ms: 20 })
  const red = await addSharedRuntime(t, gw, 'k-red', 'red', { escalationPauseS: 600 })
  red.emit('status', { phase: 'agentic' })
  red.escalate('a second factor is needed')
  return rt
}

async function checkEverything(page: Page, label: string): Promise<void> {
  await page.waitForSelector('.session-row >> text=Which cost centre?')
  await settled(page)
  await assertAccessible(page, `the overview (${label})`)
  await page.click('.session-row >> text=k-blue')
  await page.waitForSelector('#session-title')
  for (const tab of ['home', 'timeline', 'inbox']) {
    await page.click(`#tab-${tab}`)
    await settled(page)
    await assertAccessible(page, `the session's ${tab} (${label})`)
  }
  // A refusal shown at its field is accessible too.
  await page
    .locator('.question', { hasText: 'Which cost centre?' })
    .getByRole('button', { name: 'Answer' })
    .click()
  await page.waitForSelector('.field-error:not([hidden])')
  await assertAccessible(page, `a question with errors (${label})`)
  // Stop's confirmation.
  await page.getByRole('button', { name: 'Stop the agent' }).click()
  await page.waitForSelector('.confirm:not([hidden])')
  await assertAccessible(page, `Stop's confirmation (${label})`)
  await page.getByRole('button', { name: 'Keep it running' }).click()
  // The timeline read back, "Jump to latest" offered.
  await page.click('#tab-timeline')
  await page.evaluate("document.querySelector('ol.timeline').scrollTo(0, 0)")
  await page.getByRole('button', { name: 'Jump to latest' }).waitFor()
  await assertAccessible(page, `the timeline read back (${label})`)
  // A handoff, with the Kasm viewer's link.
  await page.getByRole('link', { name: '← All sessions' }).click()
  await page.click('.session-row >> text=k-red')
  await page.waitForSelector('.viewer-link')
  await settled(page)
  await assertAccessible(page, `a handoff (${label})`)
  // A link to a question that has closed says so.
  await page.goto(page.url().replace(/\/sessions\/.*$/, '/sessions/k-blue?request=q999'))
  await page.waitForSelector('.link-note:focus')
  await assertAccessible(page, `a link to a closed question (${label})`)
}

test('zero axe-core violations at desktop and phone widths, in light and dark', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await busySessions(t, gw)
  for (const viewport of WIDTHS) {
    for (const colorScheme of ['light', 'dark'] as const) {
      const context = await b.newContext({ viewport, colorScheme })
      const page = await signIn(t, b, gw, carol, { context, reuse: true })
      await checkEverything(page, `${viewport.width}px, ${colorScheme}`)
      // Readable at the phone width: nothing wider than the screen.
      const overflow = (await page.evaluate('document.documentElement.scrollWidth')) as number
      assert.ok(overflow <= viewport.width, `the page is ${overflow}px wide at ${viewport.width}px`)
      await context.close()
    }
  }
  void rt
})

test('the main journey by keyboard alone: reach a session, switch tabs, answer a question, send a message', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k1', 'blue')
  rt.emit('status', { phase: 'agentic' })
  await addSharedRuntime(t, gw, 'k2', 'blue')
  const q = rt.ask({
    title: 'Which browser?',
    fields: [
      { id: 'browser', type: 'string', enum: ['chrome', 'firefox'], required: true, label: 'Browser' },
      { id: 'n', type: 'integer', label: 'Tabs' },
    ],
  })
  const page = await signIn(t, b, gw, carol, { reuse: true })
  await page.waitForSelector('.session-row >> text=Which browser?')
  // What has the focus: its text, or for an input its type and value.
  const focused = () =>
    page.evaluate(
      `(() => { const e = document.activeElement; return e instanceof HTMLInputElement ? e.type + ':' + e.value : (e?.textContent ?? '').trim() })()`,
    ) as Promise<string>
  const tabTo = async (check: (text: string) => boolean, what: string) => {
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('Tab')
      if (check(await focused())) return
    }
    assert.fail(`Tab never reached ${what}`)
  }

  // Every row of the overview is reachable; the one needing a person comes first.
  await tabTo((s) => s.startsWith('k1'), 'the k1 row')
  await page.keyboard.press('Tab')
  assert.match(await focused(), /^k2/)
  await page.keyboard.press('Shift+Tab')
  await page.keyboard.press('Enter')
  await page.waitForSelector('#session-title >> text=k1')
  // It opens where the person acts: the question's first choice has the keyboard.
  await until(page, "document.activeElement?.type === 'radio'")
  assert.equal(await focused(), 'radio:chrome')
  assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true')

  // Answer: the radio group, the number, then Enter submits; the keyboard goes to the result.
  await page.keyboard.press('ArrowDown')
  await page.keyboard.press('Tab')
  await page.keyboard.type('3')
  await page.keyboard.press('Enter')
  await page.waitForSelector(`[data-request="${q.request_id}"] >> text=Answered by Carol`)
  await until(page, "document.activeElement?.classList.contains('form-status')")

  // The tabs: Shift+Tab back up reaches them, Tab goes from one to the next, the arrow keys too.
  for (let i = 0; i < 20 && !/^Inbox/.test(await focused()); i++) await page.keyboard.press('Shift+Tab')
  assert.match(await focused(), /^Inbox/)
  await page.keyboard.press('Shift+Tab')
  assert.equal(await focused(), 'Timeline')
  await page.keyboard.press('ArrowLeft')
  assert.equal(await focused(), 'Home')
  assert.equal(await page.getAttribute('#tab-home', 'aria-selected'), 'true')
  await page.keyboard.press('End')
  assert.match(await focused(), /^Inbox/)
  assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true')
  const stored = (await (await fetch(`${rt.url}messages`)).json()) as { messages: { values?: unknown }[] }
  assert.deepEqual(stored.messages[0]?.values, { browser: 'firefox', n: 3 })

  // A message: Tab to the box, type, Ctrl+Enter; focus stays in the box.
  await tabTo((s) => s === 'Send', 'Send')
  await page.keyboard.press('Shift+Tab')
  assert.equal(await focused(), 'Attach…')
  await page.keyboard.press('Shift+Tab')
  assert.equal(await page.evaluate('document.activeElement?.id'), 'compose-text')
  await page.keyboard.type('Thanks, carry on.')
  await page.keyboard.press('Control+Enter')
  await page.waitForSelector('.message >> text=Thanks, carry on.')
  assert.equal(await page.evaluate('document.activeElement?.id'), 'compose-text')
})
