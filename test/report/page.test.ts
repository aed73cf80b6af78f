// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { settled, signIn, startConsoleGateway, until } from '../console/helpers.ts'
import { assertAccessible, cspRefusals, sharedChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'
import { SEED_OPEN, SEED_SESSIONS, seedWeek } from './seed.ts'

const chromium = sharedChromium()

/**
 * The report page in Chromium, signed in through a real OpenID provider, over a week of records in the real
 * store: what it shows, the keyboard, the strict CSP, axe-core in light and dark at desktop and phone widths.
 * KRG_REPORT_SCREENSHOTS=<dir> keeps the pictures there (default: a temporary directory).
 */

const carol = {
  sub: 'carol',
  name: 'Carol Jensen',
  roles: ['operator' as const],
  teams: ['finance', 'support'],
}
const vic = { sub: 'vic', name: 'Vic', roles: ['viewer' as const], teams: ['finance'] }
const WIDTHS = [
  { width: 1366, height: 800 },
  { width: 390, height: 844 },
]

test('the report page: the numbers, the chart, the timeouts linked, keyboard, CSP, axe in light and dark', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol, vic] })
  await seedWeek(gw.app.teamReport.store, Date.now())
  // Registered, so their questions still open count (the runtimes are away: nothing closes them).
  for (const session of SEED_SESSIONS)
    await gw.app.sessions.put({
      ...session,
      upstream: 'http://127.0.0.1:9/',
      messagingToken: 'a-token-for-the-report-page',
      source: 'admin',
    })
  const shots = process.env.KRG_REPORT_SCREENSHOTS ?? join(tmpdir(), `krg-report-${process.pid}`)
  await mkdir(shots, { recursive: true })
  const b = await chromium(t)

  // From the console's header.
  const page = await signIn(t, b, gw, carol)
  const refused = cspRefusals(page)
  await page.getByRole('link', { name: 'Report', exact: true }).click()
  await page.waitForURL(`${gw.url}/report`)
  await page.waitForSelector('.cards')
  await settled(page)
  assert.equal(await page.title(), 'Report · kasm-runtime-gateway')
  const card = (label: string) => page.locator('.card', { hasText: label }).locator('.value').textContent()
  assert.equal(await card('Questions'), String(30 + SEED_OPEN), 'the last 24 hours by default')
  assert.match((await card('Answered in time')) ?? '', /^\d+%$/)
  assert.deepEqual(await addsUp(page), [], 'where the questions went adds up to the total')
  assert.equal(
    await page.locator('.outcomes li', { hasText: 'Still open' }).locator('.outcome-count').textContent(),
    String(SEED_OPEN),
  )
  const share = await page.locator('.card', { hasText: 'Answered in time' }).locator('.detail').textContent()
  const [, inTime, waited] = /^(\d+) of the (\d+) answered or timed out$/.exec(share ?? '') ?? []
  const outcome = (label: string) =>
    page.locator('.outcomes li', { hasText: label }).locator('.outcome-count').textContent().then(Number)
  assert.equal(Number(inTime), await outcome('Answered in time'), 'the share counts the answers in time')
  assert.equal(
    Number(waited),
    (await outcome('Answered in time')) + (await outcome('Answered late')) + (await outcome('Timed out')),
    'of those answered or timed out',
  )
  assert.ok(Number(await card('Timeouts')) > 0)
  assert.ok((await page.locator('svg.chart rect').count()) > 5, 'bars drawn')
  assert.equal((await page.locator('svg.chart rect.bar-timeout').count()) > 0, true)
  const timeout = page
    .locator('section', { has: page.locator('#timeouts-title') })
    .locator('tbody tr')
    .first()
  const link = timeout.getByRole('link')
  assert.match(
    (await link.getAttribute('href')) ?? '',
    /^\/sessions\/(expenses-7f3a|crm-merge-21|billing-export)$/,
  )
  assert.match((await timeout.locator('code.run').textContent()) ?? '', /^run-/)
  assert.equal(await page.getByRole('columnheader', { name: 'Person' }).count(), 1)
  assert.ok((await page.locator('section', { hasText: 'By person' }).locator('tbody tr').count()) >= 3)
  await page.screenshot({ path: join(shots, 'report-1366-light.png'), fullPage: true })

  // Keyboard only: the period, then the team; the URL says what is shown, and so does the CSV link.
  await page.getByLabel('Last 24 hours').focus()
  await page.keyboard.press('ArrowRight')
  await until(page, "location.search === '?window=7d'")
  await until(page, `document.querySelector('.card .value')?.textContent === '${90 + SEED_OPEN}'`)
  assert.deepEqual(await addsUp(page), [], 'a week adds up too, per team and per person')
  assert.equal(await page.locator('#teams-title').count(), 1, 'two teams: the table by team')
  await page.getByLabel('Team', { exact: true }).focus()
  await page.keyboard.press('ArrowDown')
  await until(page, "location.search === '?window=7d&team=finance'")
  assert.equal(
    await page.getByRole('link', { name: 'Download CSV' }).getAttribute('href'),
    '/api/report.csv?window=7d&team=finance',
  )
  await until(page, "document.querySelectorAll('#teams-title').length === 0")
  const download = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Download CSV' }).click(),
  ])
  assert.match(download[0].suggestedFilename(), /^krg-report-finance-7d-\d{4}-\d{2}-\d{2}\.csv$/)
  // The chart's numbers are a table too, behind a disclosure a keyboard opens.
  await page.getByText('Show the numbers').focus()
  await page.keyboard.press('Enter')
  await until(page, "document.querySelector('details').open === true")
  assert.equal(await page.locator('details tbody tr').count(), 28)
  // A shared link opens the same choice.
  await page.goto(`${gw.url}/report?window=7d&team=support`)
  await page.waitForSelector('.cards')
  assert.equal(await page.getByLabel('Team', { exact: true }).inputValue(), 'support')
  assert.equal(await page.getByLabel('Last 7 days').isChecked(), true)
  assert.deepEqual(refused, [], 'nothing refused by the CSP')

  for (const viewport of WIDTHS) {
    for (const colorScheme of ['light', 'dark'] as const) {
      const context = await b.newContext({ viewport, colorScheme })
      const p = await signIn(t, b, gw, carol, { context, path: '/report?window=7d', reuse: true })
      await p.waitForSelector('svg.chart')
      await settled(p)
      const label = `${viewport.width}px, ${colorScheme}`
      await assertAccessible(p, `the report (${label})`)
      await p.getByText('Show the numbers').click()
      await assertAccessible(p, `the report with its table open (${label})`)
      const wide = (await p.evaluate('document.documentElement.scrollWidth')) as number
      assert.ok(wide <= viewport.width, `the page is ${wide}px wide at ${viewport.width}px`)
      const chart = (await p.evaluate(
        "document.querySelector('svg.chart').getBoundingClientRect().width",
      )) as number
      assert.ok(chart <= viewport.width, 'the chart fits')
      await p.getByText('Show the numbers').click()
      await p.screenshot({ path: join(shots, `report-${viewport.width}-${colorScheme}.png`), fullPage: true })
      await context.close()
    }
  }

  // Sign out is on the report's own header too, and ends the cookie session.
  await page.goto(`${gw.url}/report`)
  await page.getByRole('button', { name: 'Sign out' }).click()
  await waitFor(
    'the report signed out',
    async () => (await page.context().request.get(`${gw.url}/auth/me`)).status() === 401,
  )

  // A viewer is told the report is not theirs, as a page.
  const context = await b.newContext()
  const viewerPage = await signIn(t, b, gw, vic, { context })
  const answer = await viewerPage.goto(`${gw.url}/report`)
  assert.equal(answer?.status(), 403)
  assert.match((await viewerPage.locator('body').textContent()) ?? '', /operators and admins/)
  assert.equal(await viewerPage.getByRole('link', { name: 'Report', exact: true }).count(), 0)
  await context.close()
  process.stdout.write(`# report screenshots in ${shots}\n`)
})

/**
 * What does not add up on the page: the outcomes against the total, each team's outcome columns against its
 * questions, each person's answers in time and late against their answers. Empty when everything does.
 */
async function addsUp(page: Page): Promise<string[]> {
  return (await page.evaluate(`(() => {
    const wrong = []
    const num = (el) => Number(el?.textContent)
    const parts = [...document.querySelectorAll('.outcomes li:not(.total) .outcome-count')].map(num)
    const total = num(document.querySelector('.outcomes .total .outcome-count'))
    const card = num([...document.querySelectorAll('.card')].find((c) => c.querySelector('dt').textContent === 'Questions').querySelector('.value'))
    if (parts.reduce((a, b) => a + b, 0) !== total || total !== card) wrong.push('outcomes ' + parts + ' of ' + total + ', card ' + card)
    const tableOf = (caption) => [...document.querySelectorAll('table')].find((t) => t.caption?.textContent === caption)
    const teams = tableOf('Questions and handoffs by team')
    if (teams) {
      const head = [...teams.tHead.rows[0].cells].map((c) => c.textContent)
      const from = head.indexOf('Questions')
      const to = head.indexOf('In time (of answered or timed out)')
      for (const row of teams.tBodies[0].rows) {
        const cells = [...row.cells].map(num)
        const sum = cells.slice(from + 1, to).reduce((a, b) => a + b, 0)
        if (sum !== cells[from]) wrong.push('team ' + row.cells[0].textContent + ': ' + sum + ' of ' + cells[from])
      }
    }
    const people = tableOf('Answers and handoffs by person')
    if (people) {
      const head = [...people.tHead.rows[0].cells].map((c) => c.textContent)
      for (const row of people.tBodies[0].rows) {
        const text = [...row.cells].map((c) => c.textContent)
        const inTime = Number(/\\((\\d+)\\/(\\d+)\\)$/.exec(text[head.indexOf('In time')])?.[1] ?? 0)
        if (inTime + Number(text[head.indexOf('Late')]) !== Number(text[head.indexOf('Answered')]))
          wrong.push('person ' + text[0] + ': ' + text.join(' | '))
      }
    }
    return wrong
  })()`)) as string[]
}
