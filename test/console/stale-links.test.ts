// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { assertAccessible, sharedChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'
import { addRuntime, signIn, startConsoleGateway, until } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

const SHEET = [{ id: 'sheet', type: 'string', label: 'Sheet' }]

/** The question the keyboard is in (null: none), and whether it is on the closed-link note. */
function whereFocus(page: Page): Promise<{ request: string | null; note: boolean }> {
  return page.evaluate(`(() => ({
    request: document.activeElement?.closest('[data-request]')?.dataset.request ?? null,
    note: document.activeElement?.classList.contains('link-note') ?? false,
  }))()`) as Promise<{ request: string | null; note: boolean }>
}

/** Opens a deep link and waits until the page has landed: on the note, or in a question. */
async function land(page: Page, url: string): Promise<{ request: string | null; note: boolean }> {
  await page.goto(url)
  await until(
    page,
    "document.activeElement?.classList.contains('link-note') || document.activeElement?.closest('[data-request]') != null",
  )
  return whereFocus(page)
}

test('a link to a question that is no longer open says it has closed and what became of it; it never opens another', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  const first = rt.run
  rt.emit('status', { phase: 'agentic' })
  const answered = rt.ask({ title: 'Which sheet?', fields: SHEET, deadlineS: 600 })
  const timedOut = rt.ask({ title: 'Which printer?', fields: SHEET, deadlineS: 0.2 })
  const open = rt.ask({ title: 'Which tab?', fields: SHEET, deadlineS: 600 })
  const b = await chromium(t)
  const page = await signIn(t, b, gw, carol, {
    path: `/sessions/k1?run=${first}&request=${answered.request_id}`,
  })
  const base = `${gw.url}/sessions/k1`

  // The link names an open question of its run: it opens there, as before.
  await until(
    page,
    `document.activeElement?.closest('[data-request]')?.dataset.request === '${answered.request_id}'`,
  )
  await page.keyboard.type('Sheet 2')
  await page.keyboard.press('Control+Enter')
  await page.locator(`[data-request="${answered.request_id}"] >> text=Answered by Carol`).waitFor()
  await page.locator(`[data-request="${timedOut.request_id}"] >> text=timed out`).waitFor()

  const note = page.locator('.link-note')
  for (const viewport of WIDTHS) {
    await page.setViewportSize(viewport)
    // Answered in this run: who answered, and when, in the person's own time.
    assert.deepEqual(await land(page, `${base}?run=${first}&request=${answered.request_id}`), {
      request: null,
      note: true,
    })
    assert.equal(await note.locator('h2').textContent(), 'That question has closed')
    assert.match(
      (await note.locator('p').first().textContent()) ?? '',
      new RegExp(
        `^${answered.request_id} “Which sheet\\?”: answered by Carol at \\d\\d:\\d\\d:\\d\\d( [AP]M)?\\.$`,
      ),
    )
    assert.match((await note.locator('time').getAttribute('datetime')) ?? '', /^\d{4}-\d\d-\d\dT/)
    assert.equal(await page.getAttribute('#tab-inbox', 'aria-selected'), 'true')
    await assertAccessible(page, `the note on an answered question at ${viewport.width}px`)

    // Timed out, named without its run (an old link): how it closed.
    await land(page, `${base}?request=${timedOut.request_id}`)
    assert.match(
      (await note.locator('p').first().textContent()) ?? '',
      new RegExp(
        `^${timedOut.request_id} “Which printer\\?”: timed out \\(the agent carried on without an answer\\) at .+\\.$`,
      ),
    )

    // No such question: the open one is offered, not opened.
    assert.deepEqual(await land(page, `${base}?request=q999`), { request: null, note: true })
    assert.match((await note.textContent()) ?? '', /has no question q999: the link is from an earlier run/)
    await note.getByRole('button', { name: 'Go to the open question' }).click()
    await until(
      page,
      `document.activeElement?.closest('[data-request]')?.dataset.request === '${open.request_id}'`,
    )
    assert.equal(await note.isVisible(), false, 'the note went with the person')

    // Dismissed, the keyboard goes to the tabs.
    await land(page, `${base}?run=${first}&request=q999`)
    await note.getByRole('button', { name: 'Dismiss' }).click()
    assert.equal(await page.evaluate('document.activeElement?.id'), 'tab-inbox')
    assert.equal(await note.isVisible(), false)
  }

  // A new run counts its questions from q1 again: the old link's q1 is not the new q1.
  const second = rt.newRun()
  rt.emit('status', { phase: 'agentic' })
  const reused = rt.ask({ title: 'Which colour?', fields: SHEET, deadlineS: 600 })
  assert.equal(reused.request_id, answered.request_id, 'the id is reused')
  for (const viewport of WIDTHS) {
    await page.setViewportSize(viewport)
    await waitFor(
      'the new run in the page',
      async () =>
        (await land(page, `${base}?run=${first}&request=${answered.request_id}`)).note &&
        ((await note.textContent()) ?? '').includes(second),
    )
    assert.equal((await whereFocus(page)).request, null, 'the new run’s q1 is not opened')
    assert.match(
      (await note.locator('p').first().textContent()) ?? '',
      new RegExp(
        `^${answered.request_id} was asked in run ${first}, which is over: the session runs ${second} now\\. Carol answered it at .+\\.$`,
      ),
    )
    await assertAccessible(page, `the note on an earlier run’s question at ${viewport.width}px`)
    // The new run's link, and a link without a run, open the new q1.
    assert.equal(
      (await land(page, `${base}?run=${second}&request=${reused.request_id}`)).request,
      reused.request_id,
    )
    assert.equal((await land(page, `${base}?request=${reused.request_id}`)).request, reused.request_id)
  }

  // The overview's row links carry the run.
  await page.goto(`${gw.url}/`)
  await page.click('.session-row >> text=k1')
  await page.waitForURL(`${base}?run=${second}&request=${reused.request_id}`)
})
