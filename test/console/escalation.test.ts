// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type EscalationState, escalationField } from '../../src/escalation/state.ts'
import { assertAccessible, cspRefusals, sharedChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { openOverview } from '../overview/helpers.ts'
import { addRuntime, assertTimeLeft, settled, signIn, startConsoleGateway, until } from './helpers.ts'

/** The console's view of a question's escalation (issue 39), from the board record the engine writes. */

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

/** One Chromium for the file's tests (the shard's, when it shares a process). */
const chromium = sharedChromium()

/** A record as the engine writes it: two steps out, one next (in `nextInMs`), one beyond the deadline. */
function record(run: string, item: string, nextInMs: number | null): EscalationState & { url: string } {
  const opened = Date.now() - 70_000
  const iso = (ms: number) => new Date(ms).toISOString()
  return {
    run,
    item,
    openedAt: iso(opened),
    steps: [
      {
        step: 0,
        afterS: 0,
        state: 'sent',
        at: iso(opened),
        targets: [
          { kind: 'slack', label: 'slack:C0123ABCD', outcome: 'sent' },
          // A field this version does not know (a URL, say) must never reach a browser.
          { kind: 'webhook', label: 'team:blue#1', outcome: 'sent', url: 'https://hooks.example/secret' },
        ] as EscalationState['steps'][number]['targets'],
      },
      {
        step: 1,
        afterS: 60,
        state: 'sent',
        at: iso(opened + 60_000),
        targets: [
          { kind: 'person', label: 'person:olivia/slack', outcome: 'sent' },
          { kind: 'person', label: 'person:oscar', outcome: 'skipped', reason: 'no_linked_account' },
        ],
      },
      {
        step: 2,
        afterS: 110,
        state: 'due',
        at: null,
        targets: [{ kind: 'pagerduty', label: 'pagerduty:team:blue#3', outcome: 'sent' }],
      },
      {
        step: 3,
        afterS: 900,
        state: 'beyond_deadline',
        at: null,
        targets: [{ kind: 'webhook', label: 'team:blue#4', outcome: 'sent' }],
      },
    ],
    next: nextInMs === null ? null : { step: 2, at: iso(Date.now() + nextInMs) },
    url: 'https://hooks.example/record',
  }
}

test('a question shows its escalation: what went out when, what was skipped, the next step counting down; a claim holds the steps, a lapse is told from the record (not a release from another tab)', async (t) => {
  const b = await chromium(t)
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  rt.emit('status', { phase: 'agentic' })
  const q = rt.ask({ title: 'Refund 40 EUR?', fields: [{ id: 'ok', type: 'boolean', label: 'Refund' }] })
  const field = escalationField(rt.run, q.request_id)
  const since = Date.now()
  await gw.app.board.set('k1', field, JSON.stringify(record(rt.run, q.request_id, 120_000)))

  // A viewer's overview carries the steps' labels and nothing else of the record.
  const vic = await bearer({ sub: 'vic', name: 'Vic', roles: ['viewer'], teams: ['blue'] })
  const overview = await openOverview(t, gw, vic)
  const entries = await overview.until('the steps in the frame', (m) => {
    const e = m.get('k1') as unknown as { escalations?: Record<string, unknown> } | undefined
    return e?.escalations?.[q.request_id] !== undefined
  })
  const frame = JSON.stringify(entries.get('k1'))
  assert.ok(frame.includes('person:olivia/slack'))
  assert.ok(!frame.includes('hooks.example'), 'no field the view does not know')

  const context = await b.newContext({ viewport: { width: 390, height: 844 } })
  t.after(() => context.close())
  const page = await signIn(t, b, gw, carol, { path: `/sessions/k1#inbox`, context })
  const refused = cspRefusals(page)
  // The overview's row says how far it went.
  await page.goto(`${gw.url}/`)
  await page.locator('.session-row >> text=escalated (step 1)').waitFor()
  await page.goto(`${gw.url}/sessions/k1#inbox`)
  const card = page.locator(`[data-request="${q.request_id}"]`)
  const steps = card.locator('.q-steps')
  await steps.locator('text=On-call paged in').waitFor()
  const text = (await steps.textContent()) ?? ''
  for (const words of [
    'First notice:',
    'Posted in Slack C0123ABCD, Webhook team:blue#1',
    'Step 1:',
    'Messaged olivia',
    '(oscar not reached: no linked chat account)',
    'Step 2: On-call paged, due 1:50 after it opened (next)',
    'Step 3: Webhook team:blue#4: not sent, after the deadline (15:00)',
  ])
    assert.ok(text.includes(words), `${JSON.stringify(words)} in ${JSON.stringify(text)}`)

  // It counts down, outside any live region: a screen reader is not told the time every second.
  const next = steps.locator('.escalation-next time')
  assertTimeLeft((await steps.locator('.escalation-next').textContent()) ?? '', 120, since)
  const first = await next.textContent()
  await until(
    page,
    `document.querySelector('.q-steps .escalation-next time')?.textContent !== ${JSON.stringify(first)}`,
  )
  assert.equal(
    await next.evaluate((el) =>
      el.closest('[aria-live], [role=status], [role=alert], [role=log], [role=timer]'),
    ),
    null,
  )
  await settled(page)
  assert.ok(
    ((await page.evaluate('document.documentElement.scrollWidth')) as number) <= 390,
    'no sideways scrolling at 390 px',
  )
  await assertAccessible(page, 'a question with its escalation')

  // "I'm on it" from the keyboard: the engine holds the steps (next: null) and the card says why.
  const take = card.getByRole('button', { name: 'I’m on it' })
  await take.focus()
  await page.keyboard.press('Enter')
  await card.locator('text=You are on it.').waitFor()
  await gw.app.board.set('k1', field, JSON.stringify(record(rt.run, q.request_id, null)))
  await steps.locator('text=Further steps wait while you are on it.').waitFor()

  // Given back from another tab of hers: no lapse (the record says none), whatever the claim's going looks like.
  const claimed = (await gw.app.overview.claims.of('k1', rt.run)).get(q.request_id)
  assert.ok(claimed !== undefined)
  const res = await fetch(
    `${gw.url}/api/sessions/k1/requests/${q.request_id}/claim?run=${encodeURIComponent(rt.run)}`,
    { method: 'DELETE', headers: { authorization: `Bearer ${await bearer(carol)}` } },
  )
  assert.ok(res.status === 200 || res.status === 204, await res.text())
  await gw.app.board.set('k1', field, JSON.stringify(record(rt.run, q.request_id, 50_000)))
  await steps.locator('text=On-call paged in').waitFor()
  await card.getByRole('button', { name: 'I’m on it' }).waitFor()
  assert.doesNotMatch((await card.locator('.form-status').textContent()) ?? '', /lapsed/)

  // Taken again, and it lapses (the engine's reader removes it and records whose lapsed): Bob takes it at
  // once, and her card still says hers lapsed, from the record.
  await card.getByRole('button', { name: 'I’m on it' }).click()
  await card.locator('text=You are on it.').waitFor()
  const mine = (await gw.app.overview.claims.of('k1', rt.run)).get(q.request_id)
  assert.ok(mine !== undefined)
  const lapsedAt = new Date(Date.parse(mine.at) + 90_000).toISOString()
  const lapsed = { sub: carol.sub, name: carol.name, claimedAt: mine.at, at: lapsedAt }
  await gw.app.overview.claims.clear('k1', rt.run, q.request_id)
  await gw.app.board.set('k1', field, JSON.stringify({ ...record(rt.run, q.request_id, 5_000), lapsed }))
  const bob = {
    sub: 'bob',
    name: 'Bob',
    roles: new Set(['operator' as const]),
    teams: new Set(['blue']),
    via: 'bearer' as const,
    expiresAt: Date.now() + 600_000,
  }
  await gw.app.overview.claims.take('k1', rt.run, q.request_id, bob)
  await card.locator('text=Bob is on it.').waitFor()
  await card
    .locator(
      '.form-status >> text=Your “I’m on it” lapsed after 90 s without an answer; the escalation goes on.',
    )
    .waitFor()
  await settled(page)
  await assertAccessible(page, 'a lapsed claim')
  // Bob gives it back and she takes it again: the notice goes (the engine ends her lapse in the record).
  await gw.app.overview.claims.release('k1', rt.run, q.request_id, bob)
  await card.getByRole('button', { name: 'I’m on it' }).click()
  await card.locator('text=You are on it.').waitFor()
  await card.locator('.form-status >> text=lapsed').waitFor({ state: 'detached' })

  // Answered: the card closes and its steps go.
  await card.getByLabel('Yes').check()
  await card.getByRole('button', { name: 'Answer' }).click()
  await page.locator(`.questions.closed [data-request="${q.request_id}"]`).waitFor()
  await page.locator(`[data-request="${q.request_id}"] .q-steps`).waitFor({ state: 'hidden' })
  assert.deepEqual(refused, [])
})

test('a handoff pause shows its escalation steps beside "I’m done, finish"', async (t) => {
  const b = await chromium(t)
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue', { escalationPauseS: 600 })
  rt.emit('status', { phase: 'agentic' })
  rt.escalate('the approval needs a second factor')
  const state = record(rt.run, 'escalation', 30_000)
  await gw.app.board.set('k1', escalationField(rt.run, 'escalation'), JSON.stringify(state))
  const context = await b.newContext({ viewport: { width: 1366, height: 800 } })
  t.after(() => context.close())
  const page = await signIn(t, b, gw, carol, { path: `/sessions/k1#inbox`, context })
  const steps = page.locator('.handoff-steps')
  await steps.locator('text=On-call paged in').waitFor()
  assert.match((await steps.textContent()) ?? '', /Step 1: Messaged olivia at /)
  await settled(page)
  await assertAccessible(page, 'a handoff with its escalation')
  // Finished: the pause and its steps go.
  await page.getByRole('button', { name: 'I’m done, finish' }).click()
  await page.getByRole('button', { name: 'Yes, finish' }).click()
  await steps.waitFor({ state: 'hidden' })
})
