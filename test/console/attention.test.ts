// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { chromiumFor } from '../helpers/chromium.ts'
import { addRuntime, signIn, startConsoleGateway, until } from './helpers.ts'

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

/** Records every notification the page makes and every permission request (the browser's own API underneath). */
const SPY = `(() => {
  const Original = window.Notification
  window.__notes = []
  window.__asked = 0
  class Recorded extends Original {
    constructor(title, options) {
      super(title, options)
      window.__notes.push({ title, body: options && options.body })
    }
  }
  Recorded.requestPermission = (...args) => {
    window.__asked++
    return Original.requestPermission(...args)
  }
  window.Notification = Recorded
})()`

test('attention: the tab title counts what waits, a notification tells of a new question, asked for with a button', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  rt.emit('status', { phase: 'agentic' })
  // The full browser: the headless shell's notification permission starts at `denied`, not a person's `default`.
  const b = await chromiumFor(t, 'browser')
  const context = await b.newContext({ viewport: { width: 1366, height: 800 } })
  await context.addInitScript(SPY)
  const page = await signIn(t, b, gw, carol, { context })
  await page.waitForSelector('.session-row >> text=k1')

  // Never asked on load.
  const button = page.getByRole('button', { name: 'Turn on notifications' })
  await button.waitFor()
  assert.equal(await page.evaluate('window.__asked'), 0)
  assert.equal(await page.evaluate('Notification.permission'), 'default')
  assert.match(await page.title(), /^Sessions · /)

  await context.grantPermissions(['notifications'], { origin: gw.url })
  await button.click()
  await page.getByRole('button', { name: 'Notifications on' }).waitFor()
  assert.equal(await page.evaluate('window.__asked'), 1)

  rt.ask({ title: 'Which cost centre?', fields: [{ id: 'cc', type: 'string', required: true }] })
  await until(page, 'window.__notes.length === 1')
  assert.deepEqual(await page.evaluate('window.__notes'), [
    { title: 'Question in k1', body: 'Which cost centre?' },
  ])
  await until(page, "document.title.startsWith('(1) Sessions')")

  rt.escalate('a second factor is needed')
  await until(page, 'window.__notes.length === 2')
  assert.deepEqual((await page.evaluate('window.__notes[1]')) as unknown, {
    title: 'Handoff in k1',
    body: 'a second factor is needed',
  })
  await until(page, "document.title.startsWith('(2) Sessions')")

  // A reload: what is already open is counted, not notified again.
  await page.reload()
  await page.waitForSelector('.session-row >> text=k1')
  await until(page, "document.title.startsWith('(2) Sessions')")
  assert.equal(await page.evaluate('window.__notes.length'), 0)

  await page.click('.session-row >> text=k1')
  await until(page, "document.title.startsWith('(2) k1')")
})
