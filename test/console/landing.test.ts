// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { sharedChromium } from '../helpers/chromium.ts'
import {
  addRuntime,
  addSharedRuntime,
  assertTimeLeft,
  consoleGatewayPerFile,
  settled,
  signIn,
  startConsoleGateway,
  until,
} from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }
const vic = { sub: 'vic', name: 'Vic', roles: ['viewer' as const], teams: ['blue'] }
/** The file's one gateway, for the tests that need nothing of their own from it: each has sessions of its own. */
const gateway = consoleGatewayPerFile({ people: [carol, vic] })

const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

/** Where the keyboard is: the question it is in, what it is, and whether a person sees it. */
interface Focus {
  request: string | null
  tag: string
  type: string | null
  label: string
  visible: boolean
}

function focus(page: Page): Promise<Focus> {
  return page.evaluate(`(() => {
    const e = document.activeElement
    const r = e.getBoundingClientRect()
    return {
      request: e.closest('[data-request]')?.dataset.request ?? null,
      tag: e.tagName.toLowerCase(),
      type: e.getAttribute('type'),
      label: (e.labels?.[0]?.textContent ?? e.textContent ?? '').trim(),
      visible: r.bottom > 0 && r.top < innerHeight && r.width > 0,
    }
  })()`) as Promise<Focus>
}

test('a session that waits for an answer opens on its soonest question, its first field focused; the state says what it waits for', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-landing', 'blue')
  rt.emit('info', { run_id: rt.run, app: 'expenses', agentic: true })
  rt.emit('status', { phase: 'agentic' })
  // Enough steps that the inbox is below the fold on a phone.
  for (let i = 1; i <= 5; i++) rt.emit('step', { n: i, action: `click(${i})`, result: 'ok' })
  const later = rt.ask({
    title: 'Which sheet?',
    fields: [{ id: 'sheet', type: 'string', label: 'Sheet' }],
    deadlineS: 280,
  })
  const soonest = rt.ask({
    title: 'Which cost centre?',
    fields: [
      { id: 'cc', type: 'string', enum: ['CC-100', 'CC-200'], required: true, label: 'Cost centre' },
      { id: 'note', type: 'string', label: 'Note' },
    ],
    deadlineS: 200,
  })
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, reuse: true })
    const row = page.locator('.session-row', { hasText: 'k-landing' })
    // Waiting for an answer, with the soonest question's time left (under 3:20, never the later one's 4:40;
    // a loaded machine may take a while to get here), not "Agent working".
    await row.locator('.run-state >> text=Waiting for an answer').waitFor()
    assert.match(
      (await row.locator('.run-state').textContent()) ?? '',
      /^Waiting for an answer · [0-3]:\d\d left$/,
    )
    assert.equal(await row.locator('text=Agent working').count(), 0)
    assert.equal(await row.locator('time').count(), 1, 'one countdown per row')

    await row.click()
    await page.waitForURL(`${gw.url}/sessions/k-landing?run=${rt.run}&request=${soonest.request_id}`)
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${soonest.request_id}'`,
    )
    const f = await focus(page)
    assert.deepEqual(
      [f.tag, f.type, f.label, f.visible],
      ['input', 'radio', 'CC-100', true],
      JSON.stringify(f),
    )
    assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true')
    assert.match(
      (await page.textContent('.session-state .run-state')) ?? '',
      /^Waiting for an answer · [0-3]:\d\d left$/,
    )
    await page.click('#tab-home')
    assert.match(
      (await page.textContent('.facts .run-state')) ?? '',
      /^Waiting for an answer · [0-3]:\d\d left$/,
    )

    // A notification's deep link names its question: that one, even when it is not the soonest.
    await page.goto(`${gw.url}/sessions/k-landing?request=${later.request_id}`)
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${later.request_id}'`,
    )
    const l = await focus(page)
    assert.deepEqual([l.tag, l.label, l.visible], ['textarea', 'Sheet', true], JSON.stringify(l))
    await page.context().close()
  }
  // Signed out, the deep link survives the identity provider's forms.
  const fresh = await signIn(t, b, gw, carol, { path: `/sessions/k-landing?request=${later.request_id}` })
  await until(
    fresh,
    `document.activeElement?.closest('[data-request]')?.dataset.request === '${later.request_id}'`,
  )
})

test('a handoff opens on the pause with the Kasm viewer’s link, which is absent when the Kasm origin is unknown', async (t) => {
  const gw = await startConsoleGateway(t, {
    people: [carol],
    env: { GATEWAY_KASM_PUBLIC_URL: 'https://kasm.example.test/ignored-path' },
  })
  const rt = await addRuntime(t, gw, 'k-h', 'blue', { escalationPauseS: 600 })
  rt.emit('status', { phase: 'agentic' })
  const escalated = Date.now()
  rt.escalate('the approval needs a second factor')
  const plain = await startConsoleGateway(t, { people: [carol] })
  const other = await addRuntime(t, plain, 'k-h', 'blue', { escalationPauseS: 600 })
  other.emit('status', { phase: 'agentic' })
  other.escalate('the approval needs a second factor')
  const b = await chromium(t)
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, reuse: true })
    await page.click('.session-row >> text=k-h')
    await page.waitForURL(`${gw.url}/sessions/k-h?handoff`)
    await until(page, "document.activeElement?.classList.contains('viewer-link')")
    const link = page.getByRole('link', { name: 'Open the session in the Kasm viewer' })
    assert.equal(await link.getAttribute('href'), 'https://kasm.example.test/desktop/k-h/vnc/vnc.html')
    assert.equal(await link.getAttribute('target'), '_blank')
    assert.equal(await link.getAttribute('rel'), 'noopener')
    assert.equal((await focus(page)).visible, true)
    const note = (await page.textContent('.handoff-note')) ?? ''
    assert.match(note, /The pause ends by itself in \d+:\d\d\.$/)
    assertTimeLeft(note, 600, escalated)
    // What the run does next renders the session again; the keyboard stays on the link (a rebuilt note
    // would drop it to the page's body).
    const said = `still waiting at ${viewport.width}`
    rt.emit('log', { level: 'info', msg: said })
    await page.waitForSelector(`.timeline >> text=${said}`, { state: 'attached' })
    await settled(page)
    assert.equal(
      await page.evaluate("document.activeElement?.classList.contains('viewer-link')"),
      true,
      'the focus is still on the viewer link',
    )
    await page.context().close()

    const without = await signIn(t, b, plain, carol, { viewport, reuse: true })
    await without.click('.session-row >> text=k-h')
    await until(without, "document.activeElement?.textContent === 'I’m done, finish'")
    assert.equal(
      await without.locator('.viewer-link').count(),
      0,
      'no link to a Kasm origin nobody configured',
    )
    await without.waitForSelector('.handoff-note >> text=Take over in the Kasm viewer, then press')
    await without.context().close()
  }
})

test('Home’s “What you can do” goes where each is done; every tab is in the Tab order', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-can', 'blue')
  rt.emit('info', { run_id: rt.run, agentic: true })
  rt.emit('status', { phase: 'agentic' })
  const q = rt.ask({
    title: 'How many?',
    fields: [{ id: 'n', type: 'integer', required: true, label: 'How many' }],
  })
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, path: '/sessions/k-can#home', reuse: true })
    await page.waitForSelector('.can button')
    const go = async (name: string, expect: string) => {
      await page.click('#tab-home')
      await page.getByRole('button', { name }).click()
      await until(page, expect)
      assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true', name)
    }
    await go(
      'Answer its open question',
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${q.request_id}'`,
    )
    await go('Send the run a message', "document.activeElement?.id === 'compose-text'")
    await go('Stop the agent’s loop', "document.activeElement?.textContent === 'Stop the agent'")

    // Tab alone reaches every tab: Home, then Timeline, then Inbox.
    await page.click('#tab-home')
    await page.focus('#tab-home')
    await page.keyboard.press('Tab')
    assert.equal(await page.evaluate('document.activeElement?.id'), 'tab-timeline')
    await page.keyboard.press('Tab')
    assert.equal(await page.evaluate('document.activeElement?.id'), 'tab-inbox')
    await page.keyboard.press('Enter')
    assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true')
    // The arrow keys still move between them (the WAI-ARIA tabs pattern).
    await page.keyboard.press('ArrowLeft')
    assert.equal(await page.evaluate('document.activeElement?.id'), 'tab-timeline')
    await page.context().close()
  }
  // A viewer's one thing to do: follow the run.
  const viewer = await signIn(t, b, gw, vic, { path: '/sessions/k-can#home' })
  await viewer.getByRole('button', { name: 'Follow the run in the Timeline' }).click()
  assert.equal(await viewer.getAttribute('#tab-timeline', 'aria-selected'), 'true')
  await settled(viewer)
})

test('after an answer the keyboard goes to its result: the next open question, then the answered card', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-answers', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const first = rt.ask({
    title: 'First?',
    fields: [{ id: 'ok', type: 'boolean', required: true, label: 'Go on' }],
    deadlineS: 100,
  })
  const second = rt.ask({
    title: 'Second?',
    fields: [{ id: 'n', type: 'integer', required: true, label: 'How many' }],
    deadlineS: 200,
  })
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, {
      viewport,
      path: `/sessions/k-answers?request=${first.request_id}`,
      reuse: true,
    })
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${first.request_id}'`,
    )
    await page.keyboard.press('Space')
    await page.keyboard.press('Enter')
    // The next open question's first field, never the page itself.
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${second.request_id}'`,
    )
    assert.equal((await focus(page)).label, 'How many')
    await page.keyboard.type('3')
    await page.keyboard.press('Enter')
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${second.request_id}' && document.activeElement.classList.contains('form-status')`,
    )
    const result = await focus(page)
    assert.equal(result.visible, true)
    await page.locator(`[data-request="${second.request_id}"] >> text=Answered by Carol`).waitFor()
    assert.notEqual(await page.evaluate('document.activeElement === document.body'), true)
    await page.context().close()
    // The next width answers a new run's questions.
    if (viewport.width === 1366) {
      rt.newRun()
      rt.emit('status', { phase: 'agentic' })
      Object.assign(
        first,
        rt.ask({
          title: 'First?',
          fields: [{ id: 'ok', type: 'boolean', required: true, label: 'Go on' }],
          deadlineS: 100,
        }),
      )
      Object.assign(
        second,
        rt.ask({
          title: 'Second?',
          fields: [{ id: 'n', type: 'integer', required: true, label: 'How many' }],
          deadlineS: 200,
        }),
      )
    }
  }
})
