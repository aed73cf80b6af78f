// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { call } from '../overview/helpers.ts'
import { addSharedRuntime, consoleGatewayPerFile, recordSeen, signIn, until } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }
const vic = { sub: 'vic', name: 'Vic', roles: ['viewer' as const], teams: ['blue'] }
/** The session token of the run whose consumer the test is (its `ack` actions). */
const SESSION_TOKEN = 'session-token-for-truth-tests'
/**
 * Each test has a session of its own on the file's one gateway; it takes the browser first, so that its pages
 * close before its session is removed.
 */
const gateway = consoleGatewayPerFile({ people: [carol, vic] })

const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

/** Every text the element showed, as it changed (a MutationObserver, from now on). */
const RECORD = (selector: string) => `(() => {
  window.__seen = []
  const el = document.querySelector(${JSON.stringify(selector)})
  const note = () => { const t = el.textContent; if (window.__seen.at(-1) !== t) window.__seen.push(t) }
  note()
  new MutationObserver(note).observe(el, { subtree: true, childList: true, characterData: true })
})()`

test('an answer’s status follows its delivery to "Responded", and never stays at "waiting"', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  // The run's consumer moves the reply on only when told (its `ack` action), and each state is held until the
  // page shows it: a loop's own timer would race the page on a loaded machine, which may then learn two
  // states at once (seen: "Waiting" never drawn because "Taken" came with the answer's own response).
  const rt = await addSharedRuntime(t, gw, 'k-delivery', 'blue', {
    consumer: 'external',
    sessionToken: SESSION_TOKEN,
  })
  rt.emit('status', { phase: 'agentic' })
  let acks = 0
  const ack = async (id: string, state: string) => {
    const res = await fetch(`${rt.url}actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-kasm-runtime-session-token': SESSION_TOKEN },
      body: JSON.stringify({ run: rt.run, key: `ack-${++acks}`, action: 'ack', args: { ids: [id], state } }),
    })
    assert.equal(res.status, 202, await res.text())
  }
  for (const viewport of WIDTHS) {
    const q = rt.ask({
      title: 'Go on?',
      fields: [{ id: 'ok', type: 'boolean', required: true, label: 'Go on' }],
    })
    const page = await signIn(t, b, gw, carol, {
      viewport,
      path: `/sessions/k-delivery?request=${q.request_id}`,
      reuse: true,
    })
    const card = page.locator(`[data-request="${q.request_id}"]`)
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${q.request_id}'`,
    )
    await page.evaluate(RECORD(`[data-request="${q.request_id}"] .form-status`))
    await card.getByLabel('Yes').check()
    await card.getByRole('button', { name: 'Answer' }).click()
    const status = (text: string) => card.locator(`.form-status >> text=${text}`).waitFor()
    await status('Answer sent. Waiting for the run to take it…')
    const id = await waitFor('the reply stored', async () => {
      const res = await fetch(`${rt.url}requests/${q.request_id}`, {
        headers: { 'x-kasm-runtime-session-token': SESSION_TOKEN },
      })
      return ((await res.json()) as { reply_id?: string }).reply_id
    })
    await ack(id, 'queued')
    await status('Answer sent. Taken by the run.')
    await ack(id, 'dispatched')
    await ack(id, 'responded')
    await status('Answer sent. Responded.')
    const seen = (await page.evaluate('window.__seen')) as string[]
    assert.deepEqual(
      seen.filter((text) => text.startsWith('Answer sent.')),
      [
        'Answer sent. Waiting for the run to take it…',
        'Answer sent. Taken by the run.',
        'Answer sent. Responded.',
      ],
      seen.join(' | '),
    )
    // The answered card says so too: who, and where the reply is.
    await card.locator('.reply-state >> text=Responded').waitFor()
    await card.locator('text=Answered by Carol').waitFor()
    await page.context().close()
  }
})

test('Stop asks first, says "Stopping…" until the loop has exited, then who stopped it; the verdict stays until the next run', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-stop', 'blue', { deliveryStepMs: 400 })
  for (const viewport of WIDTHS) {
    rt.newRun()
    rt.emit('status', { phase: 'agentic' })
    const run = rt.run
    const page = await signIn(t, b, gw, carol, { viewport, path: '/sessions/k-stop#inbox', reuse: true })
    await page.getByRole('button', { name: 'Stop the agent' }).click()
    // One more click, saying what it does; nothing is sent yet, and the keyboard is on the safe answer.
    const confirm = page.getByRole('group', { name: /^Stop the agent\?/ })
    await confirm.locator('text=This cannot be undone.').waitFor()
    assert.match((await confirm.textContent()) ?? '', /the tool call in flight finishes, then its loop exits/)
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Keep it running')
    const actions = () =>
      rt.received.filter((r) => r.method === 'POST' && r.url.startsWith('/actions')).length
    const before = actions()
    await page.keyboard.press('Escape')
    assert.equal(await confirm.isVisible(), false)
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Stop the agent')
    await page.getByRole('button', { name: 'Stop the agent' }).click()
    // Both last until the loop exits, two runtime steps (800 ms): recorded as they show.
    const stoppingBy = await recordSeen(
      page,
      `[...document.querySelectorAll('.controls .form-status')].some((e) => e.textContent.includes(${JSON.stringify(
        'Stopping by Carol: the agent finishes its current tool call (computer.click)',
      )}))`,
    )
    const stopping = await recordSeen(
      page,
      "[...document.querySelectorAll('.session-state')].some((e) => e.textContent.includes('Stopping…'))",
    )
    await page.getByRole('button', { name: 'Yes, stop the agent' }).click()
    await stoppingBy()
    await stopping()
    assert.equal(actions(), before + 1)
    // The loop exits: not "Stop accepted" forever, but what happened.
    await page.waitForSelector(
      '.controls .form-status >> text=/^Stopped by Carol at .+: the agent’s loop has exited\\. The run finishes with its verdict\\.$/',
    )
    await page.waitForSelector('.session-state >> text=Agent stopped; the run is finishing')
    assert.equal(await page.getByRole('button', { name: /Stop/ }).count(), 0)
    rt.emit('status', {
      phase: 'done',
      verdict: 'inconclusive',
      outcome: 'stopped',
      summary: 'Stopped by operator.',
    })
    rt.closeTrace({ done: true })
    await page.waitForSelector('.controls .form-status >> text=The run ended: inconclusive (stopped).')
    await page.click('#tab-home')
    await page.waitForSelector(
      '.verdict-note >> text=A person stopped the agent’s loop before the goal was reached.',
    )
    // The next run starts: its own state; the stopped run's verdict stays in the Timeline.
    rt.newRun()
    await page.waitForSelector(`.run-start >> text=${rt.run}`, { state: 'attached' })
    await page.click('#tab-timeline')
    const separator = page.locator('.run-start', { hasText: run })
    assert.equal(await separator.locator('.run-verdict').textContent(), 'inconclusive (stopped)')
    await page.click('#tab-inbox')
    assert.equal(await page.locator('.controls .form-status').textContent(), '')
    await page.context().close()
  }
})

test('a handoff a person finished reads “Handed back by Carol”, the verdict explained', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-handoff', 'blue', { escalationPauseS: 600 })
  for (const viewport of WIDTHS) {
    rt.newRun()
    rt.emit('status', { phase: 'agentic' })
    rt.escalate('the approval needs a second factor')
    const page = await signIn(t, b, gw, carol, { viewport, path: '/sessions/k-handoff?handoff', reuse: true })
    await page.getByRole('button', { name: 'I’m done, finish' }).click()
    await page.getByRole('button', { name: 'Yes, finish' }).click()
    await page.waitForSelector(
      '.controls .form-status >> text=/^Handed back by Carol after \\d+ s: the handoff is over/',
    )
    rt.emit('status', {
      phase: 'done',
      verdict: 'test-error',
      outcome: 'escalated',
      summary: 'Handed to a person.',
    })
    rt.closeTrace({ done: true })
    await page.waitForSelector('.session-state >> text=Handed back by Carol · test-error (escalated)')
    await page.click('#tab-home')
    await page.waitForSelector('dd >> text=/handed back by Carol \\(“I’m done, finish”\\) after \\d+ s/')
    await page.waitForSelector(
      '.verdict-note >> text=/the verdict is fixed as test-error \\(escalated\\) when it escalates/',
    )
    await page.click('#tab-timeline')
    await page.waitForSelector('.timeline .escalation >> text=handed back by a person (“I’m done, finish”)')
    // The overview says what happened too.
    await page.getByRole('link', { name: '← All sessions' }).click()
    await page.waitForSelector(
      '.session-row .run-state >> text=Handed back by a person · test-error (escalated)',
    )
    await page.context().close()
  }
})

test('a pause the runtime ends with its own word (deadline) reads “ran out” on Home, in the Inbox and the Timeline', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-deadline', 'blue', { escalationPauseS: 600 })
  rt.newRun()
  rt.emit('status', { phase: 'agentic' })
  rt.escalate('the approval needs a second factor')
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k-deadline?handoff', reuse: true })
  await page.getByRole('button', { name: 'I’m done, finish' }).waitFor()
  // A second runtime writes `deadline` where ours writes `timeout`: the spec names only `operator`.
  rt.emit('escalation', { reason: 'the approval needs a second factor', paused_s: 42, ended_by: 'deadline' })
  await page.waitForSelector(
    '.controls .form-status >> text=The handoff pause ran out (the runtime wrote “deadline”) after 42 s.',
  )
  await page.click('#tab-home')
  await page.waitForSelector(
    'dd >> text=the approval needs a second factor, ran out (the runtime wrote “deadline”) after 42 s',
  )
  await page.click('#tab-timeline')
  await page.waitForSelector(
    '.timeline .escalation >> text=the pause ran out (the runtime wrote “deadline”) after 42 s',
  )
  await page.context().close()
})

test('messages show who sent them, their files by name and size, and answers as the card shows them', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-messages', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const form = new FormData()
  form.append('file', new Blob(['phone: 555-0100\n'], { type: 'text/plain' }), 'notes.txt')
  const uploaded = (await (
    await fetch(`${gw.url}/desktop/k-messages/mcp/attachments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dan}` },
      body: form,
    })
  ).json()) as { id: string }
  const base = `${gw.url}/desktop/k-messages/mcp/`
  const sent = await call(`${base}messages`, 'POST', dan, {
    run: rt.run,
    key: 'dan-1',
    text: 'Numbers attached.',
    attachments: [uploaded.id],
  })
  assert.equal(sent.status, 202)
  const q = rt.ask({
    title: 'Submit anyway?',
    fields: [
      { id: 'submit', type: 'boolean', required: true, label: 'Submit anyway' },
      { id: 'tags', type: 'string[]', enum: ['x', 'y'], label: 'Tags' },
    ],
  })
  const reply = {
    run: rt.run,
    key: 'dan-2',
    reply_to: q.request_id,
    revision: 1,
    values: { submit: true, tags: ['x', 'y'] },
  }
  assert.equal((await call(`${base}messages`, 'POST', dan, reply)).status, 202)
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, path: '/sessions/k-messages#inbox', reuse: true })
    const message = page.locator('.message', { hasText: 'Numbers attached.' })
    await message.locator('.who >> text=Dan').waitFor()
    await message.getByRole('link', { name: 'notes.txt (16 B)' }).waitFor()
    assert.equal(await message.locator(`text=${uploaded.id}`).count(), 0, 'no attachment id')
    const answer = page.locator('.message', { hasText: 'answered' })
    await answer.locator('text=Dan answered “Submit anyway?”').waitFor()
    assert.deepEqual(await answer.locator('dt, dd').allTextContents(), [
      'Submit anyway',
      'Yes',
      'Tags',
      'x, y',
    ])
    assert.equal(await page.locator('text=submit: true').count(), 0)
    assert.equal(await page.locator('text=Operator (through the gateway)').count(), 0)
    // Her own message: hers at once.
    await page.fill('#compose-text', `Thanks at ${viewport.width}.`)
    await page.press('#compose-text', 'Control+Enter')
    await page
      .locator('.message', { hasText: `Thanks at ${viewport.width}.` })
      .locator('.who >> text=You (Carol)')
      .waitFor()
    // Sent with the messaging token but not through the gateway: nobody the audit log knows.
    const direct = await fetch(`${rt.url}messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-kasm-runtime-session-token': 'messaging-token-for-overview-tests',
      },
      body: JSON.stringify({ run: rt.run, key: `direct-${viewport.width}`, text: 'From elsewhere.' }),
    })
    assert.equal(direct.status, 202)
    await page
      .locator('.message', { hasText: 'From elsewhere.' })
      .locator('.who >> text=Someone with the messaging token, not through this gateway')
      .waitFor()
    await page.context().close()
  }
})

test('no empty heading; countdowns read once; a viewer sees field labels, not types', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-countdown', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const q = rt.ask({
    title: 'Submit anyway?',
    fields: [
      { id: 'submit', type: 'boolean', required: true, label: 'Submit anyway' },
      { id: 'cc', type: 'string', enum: ['CC-1', 'CC-2'], label: 'Cost centre' },
    ],
    deadlineS: 200,
  })
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, path: '/sessions/k-countdown#inbox', reuse: true })
    await page.locator('.question').first().waitFor()
    assert.equal(
      await page.getByRole('heading', { name: 'Earlier questions' }).count(),
      0,
      'nothing earlier yet',
    )
    assert.match((await page.textContent('.q-meta')) ?? '', /^q\d+ · answer within [0-3]:\d\d$/)
    const viewer = await signIn(t, b, gw, vic, { viewport, path: '/sessions/k-countdown#inbox', reuse: true })
    // A read that does not wait: the viewer's page may not have drawn the question yet (a loaded run read
    // none). Its list is drawn whole, so its first item means all of them.
    await viewer.locator('.q-fields li').first().waitFor()
    const fields = await viewer.locator('.q-fields li').allTextContents()
    assert.deepEqual(fields, ['Submit anyway: Yes or No, required', 'Cost centre: one of CC-1, CC-2'])
    assert.equal(await viewer.locator('text=(boolean)').count(), 0)
    await viewer.context().close()
    await page.context().close()
  }
  // Once a question is answered, it is earlier: the heading has something under it.
  const page = await signIn(t, b, gw, carol, {
    path: `/sessions/k-countdown?request=${q.request_id}`,
    reuse: true,
  })
  await page.locator(`[data-request="${q.request_id}"]`).getByLabel('No').check()
  await page.getByRole('button', { name: 'Answer' }).click()
  await page.getByRole('heading', { name: 'Earlier questions' }).waitFor()
  assert.equal(await page.locator('.questions.closed .question').count(), 1)
})
