// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { sharedChromium } from '../helpers/chromium.ts'
import { addSharedRuntime, consoleGatewayPerFile, settled, signIn, until } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol Operator', roles: ['operator' as const], teams: ['blue', 'red'] }
/** The file's one gateway, for the tests that need nothing of their own from it: each has sessions of its own. */
const gateway = consoleGatewayPerFile({ people: [carol] })

const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

/** An element's box on screen. */
function box(
  page: Page,
  selector: string,
): Promise<{ top: number; bottom: number; left: number; height: number }> {
  return page.evaluate(`(() => {
    const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect()
    return { top: r.top, bottom: r.bottom, left: r.left, height: r.height }
  })()`) as Promise<{ top: number; bottom: number; left: number; height: number }>
}

test('the header is one line, filters keep their labels, rows line up, long free text is a textarea', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const asking = await addSharedRuntime(t, gw, 'k-asking', 'blue')
  asking.emit('status', { phase: 'agentic' })
  const q = asking.ask({
    title: 'Details?',
    fields: [
      { id: 'why', type: 'string', label: 'Why' },
      { id: 'note', type: 'string', max_length: 200, label: 'Note for the approver' },
      { id: 'ref', type: 'string', pattern: '^[a-z]+$', label: 'Reference' },
      { id: 'code', type: 'string', max_length: 12, label: 'Code' },
    ],
  })
  await addSharedRuntime(t, gw, 'k-quiet', 'red')
  for (const viewport of WIDTHS) {
    const page = await signIn(t, b, gw, carol, { viewport, reuse: true })
    await page.waitForSelector('.session-row >> text=k-quiet')
    await page.waitForSelector('.session-row.needs-person')
    await settled(page)
    // One line, at most about 56 px, its controls side by side.
    const bar = await box(page, '.bar')
    assert.ok(bar.height <= 57, `the header is ${bar.height}px high at ${viewport.width}px`)
    const brand = await box(page, '.bar .brand')
    const signOut = await box(page, '.bar .sign-out button')
    assert.ok(Math.abs(brand.top + brand.height / 2 - (signOut.top + signOut.height / 2)) < 8, 'one line')
    // Whatever the browser's permission (the headless shell's is `denied`), the button's name is its long label.
    const long = (await page.locator('.bar button.notify .long').textContent()) ?? ''
    assert.match(long, /notifications/i)
    assert.equal(
      await page.getByRole('button', { name: long, exact: true }).count(),
      1,
      'the short label keeps the full name',
    )
    // The Team filter's label and select together.
    const label = await box(page, 'label[for="filter-team"]')
    const select = await box(page, '#filter-team')
    assert.ok(
      Math.abs(label.top + label.height / 2 - (select.top + select.height / 2)) < 6,
      'Team beside its select',
    )
    assert.ok(select.left > label.left)
    // Cards line up whether or not they carry the attention bar.
    const needing = await box(page, '.session-row.needs-person .row-main')
    const quiet = await box(page, '.session-row:not(.needs-person) .row-main')
    assert.equal(needing.left, quiet.left)
    const width = (await page.evaluate('document.documentElement.scrollWidth')) as number
    assert.ok(width <= viewport.width, `the page is ${width}px wide`)

    await page.click('.session-row >> text=k-asking')
    const card = page.locator(`[data-request="${q.request_id}"]`)
    await card.waitFor()
    const tag = async (name: string) =>
      card.getByLabel(name, { exact: true }).evaluate((e) => e.tagName.toLowerCase())
    assert.equal(await tag('Why'), 'textarea')
    assert.equal(await tag('Note for the approver'), 'textarea')
    assert.equal(await tag('Reference'), 'input', 'a pattern is a value, not prose')
    assert.equal(await tag('Code'), 'input')
    // Ctrl+Enter answers from a textarea (Enter is a new line there).
    await card.getByLabel('Why', { exact: true }).fill('because')
    await card.getByLabel('Why', { exact: true }).press('Control+Enter')
    await card.locator('text=Answered by Carol Operator').waitFor()
    await page.context().close()
    if (viewport.width === 1366) {
      asking.newRun()
      asking.emit('status', { phase: 'agentic' })
      Object.assign(
        q,
        asking.ask({
          title: 'Details?',
          fields: [
            { id: 'why', type: 'string', label: 'Why' },
            { id: 'note', type: 'string', max_length: 200, label: 'Note for the approver' },
            { id: 'ref', type: 'string', pattern: '^[a-z]+$', label: 'Reference' },
            { id: 'code', type: 'string', max_length: 12, label: 'Code' },
          ],
        }),
      )
    }
  }
})

test('the timeline scrolls itself under the header and tabs, opens at the newest event, stays put while read back with "Jump to latest", and End reaches the newest', async (t) => {
  const b = await chromium(t)
  const gw = await gateway()
  const rt = await addSharedRuntime(t, gw, 'k-timeline', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const long = 'a result long enough to wrap over several lines at a phone width, '.repeat(6)
  for (let i = 1; i <= 300; i++) {
    rt.emit('step', { n: i, action: `click(${i})`, result: i % 3 === 0 ? long : 'ok', duration_ms: i })
    if (i % 5 === 0) rt.emit('screenshot', { file: `screenshots/${i}.png`, step: i, label: `after ${i}` })
  }
  // A runtime's own instant in a result (UTC), among the items' times.
  rt.emit('step', { n: 301, action: 'wait()', result: 'waiting until 2026-09-16T14:02:00Z' })
  const total = () => rt.emit('log', { level: 'info', msg: 'marker' }).seq
  const lastVisible =
    "(() => { const r = document.querySelector('ol.timeline').lastElementChild.getBoundingClientRect(); return r.bottom <= innerHeight + 1 && r.bottom > 0 })()"
  const listTop = "document.querySelector('ol.timeline').scrollTop"
  for (const viewport of WIDTHS) {
    // Somewhere whose clock is not UTC: the times are the person's own.
    const context = await b.newContext({ viewport, timezoneId: 'Asia/Kolkata', locale: 'en-GB' })
    const page = await signIn(t, b, gw, carol, { context, path: '/sessions/k-timeline#home', reuse: true })
    const count = total()
    await page.waitForSelector('.can button')
    await page.click('#tab-timeline')
    await until(page, `document.querySelectorAll('ol.timeline > li.item').length >= ${count}`)
    // Opens at the newest event, and the page stays where it was: the header and the tabs in view.
    await until(page, lastVisible)
    await settled(page)
    assert.equal(await page.evaluate('window.scrollY'), 0, 'the page did not move')
    for (const selector of ['.bar', '#session-title', '#tab-home', '#tab-inbox'])
      assert.ok((await box(page, selector)).top >= 0, `${selector} in view at ${viewport.width}px`)
    const jump = page.getByRole('button', { name: 'Jump to latest' })
    assert.equal(await jump.isVisible(), false)

    // One way of writing a time throughout: the person's clock, the instant itself in <time datetime>.
    const times = (await page.evaluate(`[...document.querySelectorAll('ol.timeline time')].map((e) =>
      [e.getAttribute('datetime'), e.getAttribute('title'), e.textContent])`)) as [string, string, string][]
    assert.ok(times.length > 300)
    for (const [datetime, title, text] of times) {
      assert.equal(title, datetime)
      assert.match(text, /^\d\d:\d\d:\d\d$/, `${datetime} is written ${text}`)
    }
    assert.ok(
      times.some(([datetime, , text]) => datetime === '2026-09-16T14:02:00Z' && text === '19:32:00'),
      'the result’s UTC instant is written in the person’s time',
    )
    assert.doesNotMatch(
      (await page.textContent('ol.timeline')) ?? '',
      /\d{4}-\d\d-\d\dT\d\d:\d\d/,
      'no ISO timestamp shown as such',
    )

    // Read back: the row in view stays where it is while new events come, and the way back is offered.
    await page.hover('ol.timeline')
    await page.mouse.wheel(0, -4000)
    await jump.waitFor()
    await settled(page)
    const anchor = (await page.evaluate(
      "(() => { const el = document.elementFromPoint(innerWidth / 2, innerHeight / 2).closest('li'); el.dataset.anchor = '1'; return el.getBoundingClientRect().top })()",
    )) as number
    for (let i = 0; i < 20; i++) rt.emit('step', { n: 1000 + i, action: 'more', result: long })
    await until(page, `document.querySelectorAll('ol.timeline > li.item').length >= ${count + 20}`)
    await settled(page)
    const after = (await page.evaluate(
      "document.querySelector('li[data-anchor]').getBoundingClientRect().top",
    )) as number
    assert.ok(Math.abs(after - anchor) < 1, `the row read moved from ${anchor} to ${after}`)
    // Scrolling further back lays nothing out anew: the rows above keep their place under the reader.
    for (let step = 0; step < 5; step++) {
      const before = (await page.evaluate(
        `[${listTop}, document.querySelector('li[data-anchor]').getBoundingClientRect().top]`,
      )) as [number, number]
      await page.mouse.wheel(0, -300)
      await settled(page)
      const now = (await page.evaluate(
        `[${listTop}, document.querySelector('li[data-anchor]').getBoundingClientRect().top]`,
      )) as [number, number]
      const scrolled = before[0] - now[0]
      assert.ok(
        Math.abs(now[1] - before[1] - scrolled) < 1,
        'the rows move exactly as far as the list scrolled',
      )
    }
    assert.equal(await page.evaluate('window.scrollY'), 0, 'reading back scrolls the list, not the page')
    await jump.click()
    await until(page, lastVisible)
    assert.equal(await jump.isVisible(), false)
    // Following again: a new event keeps the newest in view.
    rt.emit('log', { level: 'warn', msg: 'the newest line' })
    await page.waitForSelector('.timeline .log-warn >> text=the newest line')
    await until(page, lastVisible)

    // End from the top reaches the newest item, with every row laid out at its real size.
    await page.evaluate(`document.querySelector('ol.timeline').scrollTop = 0`)
    await page.focus('ol.timeline')
    await page.keyboard.press('End')
    // The browser's keyboard scroll is animated: a loaded machine needs more than a frame or two for it.
    await until(page, lastVisible)
    assert.ok((await box(page, '#tab-timeline')).top >= 0, 'the tabs still in view')
    await page.context().close()
  }
})
