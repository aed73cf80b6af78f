// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { call, openOverview } from '../overview/helpers.ts'
import { addSharedRuntime, assertTimeLeft, consoleGatewayPerFile, signIn } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }
const vic = { sub: 'vic', name: 'Vic', roles: ['viewer' as const], teams: ['blue'] }
/** The file's one gateway: each test has a session of its own. */
const gateway = consoleGatewayPerFile({ people: [carol, vic] })

test("another operator answers first: the 409 says who, and shows their answer; I'm on it marks are shared", async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-first', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const first = rt.ask({
    title: 'How many rows?',
    fields: [{ id: 'rows', type: 'integer', required: true, label: 'Rows' }],
  })
  const second = rt.ask({
    title: 'Which sheet?',
    fields: [{ id: 'sheet', type: 'string', required: true, label: 'Sheet' }],
  })

  const page = await signIn(t, b, gw, carol, { path: '/sessions/k-first#inbox' })
  const q1 = page.locator(`[data-request="${first.request_id}"]`)
  const q2 = page.locator(`[data-request="${second.request_id}"]`)
  await q1.waitFor()

  // Dan takes the first question: Carol sees it, and is not offered to take it.
  const claim = `${gw.url}/api/sessions/k-first/requests/${first.request_id}/claim?run=${encodeURIComponent(rt.run)}`
  assert.equal((await call(claim, 'PUT', dan)).status, 200)
  await q1.locator('text=Dan is on it.').waitFor()
  assert.equal(await q1.getByRole('button', { name: 'I’m on it' }).isVisible(), false)

  // Carol takes the second; Dan's overview shows it.
  await q2.getByRole('button', { name: 'I’m on it' }).click()
  await q2.locator('text=You are on it.').waitFor()
  assert.equal(await q2.getByRole('button', { name: 'Release' }).getAttribute('aria-pressed'), 'true')
  const danOverview = await openOverview(t, gw, dan)
  await danOverview.until(
    "Carol's mark",
    (m) => m.get('k-first')?.claims[second.request_id]?.name === 'Carol',
  )

  // Dan answers while the run's events are held up, so Carol's form still looks open when she answers.
  rt.stallStreams(true)
  const reply = { run: rt.run, key: 'dan-1', reply_to: first.request_id, revision: 1, values: { rows: 42 } }
  assert.equal((await call(`${gw.url}/desktop/k-first/mcp/messages`, 'POST', dan, reply)).status, 202)
  await q1.getByLabel('Rows').fill('7')
  await q1.getByRole('button', { name: 'Answer' }).click()
  await q1.locator('text=Someone answered first. Answered by Dan').waitFor()
  assert.equal(await q1.locator('dd').textContent(), '42', "Dan's answer is shown")
  await q1.locator('.form-status >> text=Your answer was not needed').waitFor()
  assert.equal(await q1.getByRole('button', { name: 'Answer' }).count(), 0)
  rt.stallStreams(false)
  // The question moves to the earlier ones once its closing arrives, shown once.
  await page.locator(`.questions.closed [data-request="${first.request_id}"]`).waitFor()
  assert.equal(await page.locator(`[data-request="${first.request_id}"]`).count(), 1)
})

test('a viewer sees the session and its questions but no write control at all', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-viewer', 'blue')
  rt.emit('info', { run_id: rt.run, agentic: true })
  rt.emit('status', { phase: 'agentic' })
  const q = rt.ask({ title: 'Approve?', fields: [{ id: 'ok', type: 'boolean', required: true }] })
  const page = await signIn(t, b, gw, vic, { path: '/sessions/k-viewer#inbox' })
  const question = page.locator(`[data-request="${q.request_id}"]`)
  await question.locator('text=Your role can read this question but not answer it.').waitFor()
  await page.locator('text=Your role can read this session but not write to it.').waitFor()
  for (const name of ['Answer', 'Send', 'Attach…', 'Stop the agent', 'I’m done, finish', 'I’m on it']) {
    assert.equal(await page.getByRole('button', { name }).count(), 0, `a viewer has no ${name}`)
  }
  assert.equal(await page.locator('textarea, input[type=file]').count(), 0)
  // No notification button in any state (the headless shell would label it "Notifications blocked").
  assert.equal(await page.getByRole('button', { name: /notif/i }).count(), 0)
  assert.doesNotMatch(await page.title(), /^\(/, 'nothing to act on for a viewer in the title')
})

test('a handoff pause: I’m done, finish with the reason and the time left, then gone', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-handoff', 'blue', { escalationPauseS: 600 })
  rt.emit('status', { phase: 'agentic' })
  const page = await signIn(t, b, gw, carol, { reuse: true })
  await page.waitForSelector('.session-row >> text=k-handoff')
  const escalated = Date.now()
  rt.escalate('the approval needs a second factor')
  await page.waitForSelector('.session-row >> text=Handoff:')
  await page.waitForSelector('.session-row >> text=the approval needs a second factor')
  await page.waitForSelector('.session-row .need-handoff time')
  assert.match(await page.title(), /^\(1\) /)
  await page.click('.session-row >> text=k-handoff')
  await page.click('#tab-inbox')
  await page.waitForSelector('.handoff-note >> text=the approval needs a second factor')
  const note = (await page.locator('.handoff-note time').textContent()) ?? ''
  assert.match(note, /^The pause ends by itself in \d+:\d\d\.$/)
  assertTimeLeft(note, 600, escalated)
  assert.equal(
    await page.getByRole('button', { name: 'Stop the agent' }).isVisible(),
    false,
    'no Stop: the loop has exited',
  )
  await page.getByRole('button', { name: 'I’m done, finish' }).click()
  await page.getByRole('button', { name: 'Yes, finish' }).click()
  await page.waitForSelector('button:has-text("I’m done, finish")', { state: 'hidden' })
  await page.waitForSelector('.timeline .escalation', { state: 'attached' })
  await page.click('#tab-home')
  await page.waitForSelector(
    'dd >> text=the approval needs a second factor, handed back by Carol (“I’m done, finish”)',
  )
  assert.doesNotMatch(await page.title(), /^\(/)
})
