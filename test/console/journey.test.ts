// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page, Request } from 'playwright-core'
import { recordTraffic, sharedChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'
import { addRuntime, recordSeen, settled, signIn, startConsoleGateway, TOKEN, until } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue', 'red', 'green'] }

/** The event streams the page holds open now (responses of type text/event-stream not yet finished). */
function streamCounter(page: Page): () => number {
  const open = new Set<Request>()
  page.on('response', (r) => {
    if (r.headers()['content-type']?.includes('text/event-stream')) open.add(r.request())
  })
  page.on('requestfinished', (r) => open.delete(r))
  page.on('requestfailed', (r) => open.delete(r))
  return () => open.size
}

test('the main journey: overview of two teams, one session, events, a refused then accepted answer, a message with an attachment, Stop', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const blue = await addRuntime(t, gw, 'k-blue', 'blue')
  // Each delivery state lasts 250 ms here (a stop's wait twice that): long enough to be seen on screen.
  const red = await addRuntime(t, gw, 'k-red', 'red', {
    redactPatterns: ['sk-[A-Za-z0-9]{8,}'],
    deliveryStepMs: 250,
  })
  // More sessions than a browser has connections per origin: the page must still hold at most two streams.
  for (let i = 1; i <= 6; i++) await addRuntime(t, gw, `k-green-${i}`, 'green')
  blue.emit('info', { run_id: blue.run, app: 'expenses', goal: 'File the March report', agentic: true })
  blue.emit('status', { phase: 'agentic' })
  red.emit('info', { run_id: red.run, app: 'crm', goal: 'Merge duplicate contacts', agentic: true })
  red.emit('status', { phase: 'agentic' })
  const question = red.ask({
    title: 'Which reference should the merged record keep?',
    fields: [{ id: 'ref', type: 'string', pattern: '^[a-z0-9-]+$', required: true, label: 'Reference' }],
    deadlineS: 200,
  })

  const b = await chromium(t)
  // Carol opens the console signed out: the IdP asks who she is, and she comes back to the overview.
  let seen: string[] = []
  let streams: () => number = () => 0
  const page = await signIn(t, b, gw, carol, {
    before: (p) => {
      streams = streamCounter(p)
      seen = recordTraffic(p)
    },
  })

  // The overview: every session of Carol's teams, the one with a question first.
  await page.waitForSelector('.session-row >> text=k-green-6')
  await until(page, "document.querySelector('.session-row .kasm-id')?.textContent === 'k-red'")
  const order = await page.locator('.session-row .kasm-id').allTextContents()
  assert.equal(order[0], 'k-red')
  assert.equal(order.length, 8)
  await page.waitForSelector(
    '.session-row:first-child >> text=Which reference should the merged record keep?',
  )
  assert.match(await page.title(), /^\(1\) Sessions/)
  await waitFor('one overview stream', () => streams() === 1 && gw.app.overview.hub.stats().streams === 1)
  assert.equal(gw.app.events.streams.stats().viewers, 0)

  // One session: its full event stream is the second and last long-lived connection.
  await page.click('.session-row >> text=k-red')
  await page.waitForSelector('h1#session-title >> text=k-red')
  assert.equal(new URL(page.url()).pathname, '/sessions/k-red')
  await waitFor('two streams', () => streams() === 2 && gw.app.events.streams.stats().viewers === 1)
  await page.click('#tab-timeline')
  red.emit('log', { level: 'warn', msg: 'the second record has no phone number' })
  await page.waitForSelector('.timeline .log-warn >> text=the second record has no phone number')

  // Answer with a value the run's redaction would make invalid: refused with 422, shown at the field.
  await page.click('#tab-inbox')
  const form = page.locator(`[data-request="${question.request_id}"]`)
  await form.getByLabel('Reference').fill('sk-abcdefgh1234')
  await form.getByRole('button', { name: 'Answer' }).click()
  await form.locator('.field-error >> text=does not match').waitFor()
  assert.equal(await form.getByLabel('Reference').getAttribute('aria-invalid'), 'true')
  assert.equal(await page.locator('.question').count(), 1, 'a question is shown once')
  await form.getByLabel('Reference').fill('ab-1234')
  await form.getByRole('button', { name: 'Answer' }).click()
  await form.locator('text=Answered by Carol').waitFor()
  const replies = red.received.filter((r) => r.method === 'POST' && r.url.startsWith('/messages'))
  assert.equal(replies.length, 2)

  // A message with an attachment, sent with Ctrl+Enter; its delivery state follows live.
  await page.setInputFiles('#compose-file', {
    name: 'notes.txt',
    mimeType: 'text/plain',
    buffer: Buffer.from('phone: 555-0100\n'),
  })
  await page.waitForSelector('.chips >> text=notes.txt (16 B)')
  await page.fill('#compose-text', 'Keep the record with the phone number.')
  await page.press('#compose-text', 'Control+Enter')
  await page.waitForSelector('.message >> text=Keep the record with the phone number.')
  await page.waitForSelector('.message .state-responded')
  const upload = red.received.find((r) => r.method === 'POST' && r.url.startsWith('/attachments'))
  assert.ok(upload, 'the attachment was uploaded')
  const stored = (await (await fetch(`${red.url}messages`)).json()) as {
    messages: { text?: string; attachments?: string[] }[]
  }
  const message = stored.messages.find((m) => m.text === 'Keep the record with the phone number.')
  assert.equal(message?.attachments?.length, 1, 'the message carries the uploaded attachment')
  assert.equal(
    await page.evaluate('document.activeElement?.id'),
    'compose-text',
    'focus stays in the compose box',
  )

  // Stop: confirmed first, then "Stopping…" until the loop has exited, then no Stop any more. "Stopping…"
  // lasts two delivery steps (500 ms): the page records that it showed, however late this test looks.
  await page.getByRole('button', { name: 'Stop the agent' }).click()
  const stopping = await recordSeen(
    page,
    "[...document.querySelectorAll('button')].some((b) => !b.hidden && b.textContent.includes('Stopping…'))",
  )
  await page.getByRole('button', { name: 'Yes, stop the agent' }).click()
  await stopping()
  await page.waitForSelector('button:has-text("Stopping…")', { state: 'hidden' })
  await until(
    page,
    "[...document.querySelectorAll('button')].every((b) => b.hidden || !/Stop/.test(b.textContent))",
  )
  assert.ok(red.received.some((r) => r.method === 'POST' && r.url.startsWith('/actions')))

  // Back to the overview: the session stream closes, the overview's stays.
  await page.getByRole('link', { name: '← All sessions' }).click()
  await page.waitForSelector('.session-row')
  await waitFor('one stream again', () => streams() === 1 && gw.app.events.streams.stats().viewers === 0)
  await settled(page)

  // Nothing the browser saw ever held the messaging token.
  const cookies = await page.context().cookies()
  const session = cookies.filter((c) => c.name.startsWith('krg_'))
  assert.deepEqual(
    session.map((c) => [c.name, c.httpOnly, c.sameSite]),
    [['krg_session', true, 'Strict']],
    "the gateway's only cookie is its HttpOnly session (the rest are the IdP's)",
  )
  for (const text of [...seen, ...cookies.map((c) => c.value), await page.content()]) {
    assert.ok(!text.includes(TOKEN), 'the messaging token reached the browser')
  }
  const post = red.received.find((r) => r.method === 'POST' && r.url.startsWith('/messages'))
  assert.equal(post?.headers['x-kasm-runtime-session-token'], TOKEN)
})
