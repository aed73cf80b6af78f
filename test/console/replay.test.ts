// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedChromium } from '../helpers/chromium.ts'
import { addRuntime, signIn, startConsoleGateway, until } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

/** Counts what happens to the timeline list and the Home panel (a MutationObserver, set before the page runs). */
const OBSERVE = `(() => {
  window.__timeline = { batches: 0, added: 0, removed: 0 }
  // Redraws of the Home panel (a redraw replaces its content).
  window.__home = 0
  new MutationObserver((records) => {
    for (const r of records) {
      const el = r.target
      if (el.matches && el.matches('ol.timeline')) {
        window.__timeline.batches++
        window.__timeline.added += r.addedNodes.length
        window.__timeline.removed += r.removedNodes.length
      } else if (el.closest && el.closest('.home') && r.removedNodes.length > 0) window.__home++
    }
  }).observe(document, { subtree: true, childList: true })
})()`

interface Counts {
  batches: number
  added: number
  removed: number
}

test('a replayed session of 1,000 events renders in a few batches, never re-rendering what is there', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  rt.emit('info', { run_id: rt.run, app: 'expenses', agentic: true })
  rt.emit('status', { phase: 'agentic' })
  // The runtime's own opening info, these two, and 997 more: 1,000 events.
  for (let i = 1; i <= 997; i++) {
    if (i % 3 === 0) rt.emit('log', { level: 'info', msg: `line ${i}` })
    else rt.emit('step', { n: i, action: `click(${i})`, result: 'ok', duration_ms: i })
  }
  const b = await chromium(t)
  const context = await b.newContext({ viewport: { width: 1366, height: 800 } })
  await context.addInitScript(OBSERVE)
  const page = await signIn(t, b, gw, carol, { context, path: '/sessions/k1' })
  await page.click('#tab-timeline')
  // 1,000 events plus the run's header.
  await until(page, "document.querySelectorAll('ol.timeline > li').length === 1001")
  const replayed = (await page.evaluate('window.__timeline')) as Counts
  assert.equal(replayed.removed, 0)
  assert.equal(replayed.added, 1001)
  // Handled in slices of a few milliseconds, appended once per frame: far fewer appends than events.
  assert.ok(replayed.batches <= 100, `1,000 events were appended in ${replayed.batches} batches`)
  const homeAfterReplay = (await page.evaluate('window.__home')) as number
  assert.ok(homeAfterReplay <= 6, `the Home panel was redrawn ${homeAfterReplay} times during the replay`)

  // Live events after the replay: appended, the items already there untouched.
  await page.evaluate("document.querySelector('ol.timeline > li:nth-child(2)').dataset.mark = 'first'")
  for (let i = 0; i < 50; i++) rt.emit('log', { level: 'info', msg: `live ${i}` })
  await until(page, "document.querySelectorAll('ol.timeline > li').length === 1051")
  const live = (await page.evaluate('window.__timeline')) as Counts
  assert.equal(live.removed, 0)
  assert.equal(live.added, 1051)
  assert.equal(await page.getAttribute('ol.timeline > li:nth-child(2)', 'data-mark'), 'first')
  assert.ok(
    ((await page.evaluate('window.__home')) as number) - homeAfterReplay <= 2,
    'log lines do not redraw Home',
  )
})
