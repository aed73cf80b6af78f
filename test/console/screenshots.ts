/**
 * `npm run screenshots`: pictures of every view of the console, made in Chromium from a real gateway and
 * simulated runtimes in a state a support lead would recognise, signed in through a real OpenID provider as
 * a person is: the overview, a session's Home, Timeline and Inbox (a question, a handoff, a stop being
 * confirmed), and the sign-in pages, at 1366x800 and 390x844, light and dark. Not a test: run it after
 * changing the page, then look at every picture.
 *
 *   npm run screenshots                         writes to $TMPDIR/krg-console-screenshots (or --out <dir>)
 *   npm run screenshots -- --update-docs        also replaces the pictures in docs/ (README, console.md)
 *   npm run screenshots -- --widths phone --schemes dark     a part of them
 */
import { copyFile, mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { Page } from 'playwright-core'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { type EscalationState, escalationField } from '../../src/escalation/state.ts'
import { openSse } from '../events/helpers.ts'
import { launchChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { signInWithChromium, startSignInStack } from '../signin/harness.ts'

const { values: args } = parseArgs({
  options: {
    out: { type: 'string' },
    'update-docs': { type: 'boolean', default: false },
    // A part of the set (a quick look, the test of this script): comma lists.
    widths: { type: 'string', default: 'desktop,phone' },
    schemes: { type: 'string', default: 'light,dark' },
  },
})
const widths = new Set(args.widths.split(','))
const schemes = new Set(args.schemes.split(','))
if (args['update-docs'] && !(widths.has('desktop') && widths.has('phone') && schemes.has('light')))
  throw new Error('--update-docs needs both widths and the light scheme')
const out = resolve(args.out ?? join(tmpdir(), 'krg-console-screenshots'))
const docs = fileURLToPath(new URL('../../docs/', import.meta.url))
await mkdir(out, { recursive: true })

const TOKEN = 'screenshots-messaging-token'
const cleanups: (() => unknown)[] = []
const stack = await startSignInStack(
  { after: (fn) => void cleanups.push(fn) },
  {
    env: { GATEWAY_PRESENCE_TTL_MS: '1000', GATEWAY_KASM_PUBLIC_URL: 'https://kasm.example.com' },
    idp: {
      people: [
        {
          sub: 'carol',
          username: 'carol',
          name: 'Carol',
          email: 'carol@example.test',
          roles: ['operator'],
          teams: ['finance', 'support'],
        },
      ],
    },
  },
)
const { app, origin: url } = stack
const runtimes: SimulatedRuntime[] = []

async function session(
  kasmId: string,
  team: string,
  info: Record<string, unknown>,
): Promise<SimulatedRuntime> {
  const rt = await startSimulatedRuntime({
    messagingToken: TOKEN,
    kasmId,
    escalationPauseS: 900,
    deliveryStepMs: 60,
  })
  runtimes.push(rt)
  rt.emit('info', { run_id: rt.run, agentic: true, ...info })
  await app.sessions.put({ kasmId, upstream: rt.url, team, messagingToken: TOKEN, source: 'admin' })
  return rt
}

function work(rt: SimulatedRuntime, steps: [string, string][]): void {
  rt.emit('status', { phase: 'boot', detail: 'starting Xvfb :1' })
  rt.emit('status', { phase: 'launch', detail: 'launching the app' })
  rt.emit('status', { phase: 'agentic', detail: 'working on the goal' })
  steps.forEach(([action, result], i) => {
    rt.emit('iteration', {
      n: i + 1,
      content: `Next: ${action}`,
      tool_calls: [{ name: action.split('(')[0] }],
    })
    rt.emit('step', { n: i + 1, action, result, duration_ms: 300 + i * 120, backend: 'desktop' })
    rt.emit('screenshot', {
      file: `screenshots/${String(i + 1).padStart(4, '0')}.png`,
      step: i + 1,
      label: result,
    })
    if (i === 2) rt.emit('log', { level: 'warn', msg: 'the receipt scan is blurry; reading it with OCR' })
  })
}

const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['finance', 'support'] })
const asDan = (path: string, method: string, body?: unknown) =>
  fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${dan}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })

const expenses = await session('expenses-7f3a', 'finance', {
  app: 'expenses',
  version: '4.2.1',
  goal: 'File the March travel expenses and submit them for approval',
})
work(expenses, [
  ['click(text="New report")', 'form "Untitled report" opened'],
  ['type(field="Title", text="March travel")', 'typed 12 characters'],
  ['click(text="Add expense")', 'row 1 added'],
  ['type(field="Amount", text="182.40")', 'typed "182.40"'],
])
// Dan sent the run a receipt through the gateway, and answered its first question.
const receipt = new FormData()
receipt.append('file', new Blob([Buffer.alloc(41_000, 1)], { type: 'application/pdf' }), 'receipt-0311.pdf')
const uploaded = (await (
  await fetch(`${url}/desktop/expenses-7f3a/mcp/attachments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${dan}` },
    body: receipt,
  })
).json()) as { id: string }
await asDan('/desktop/expenses-7f3a/mcp/messages', 'POST', {
  run: expenses.run,
  key: 'dan-receipt',
  text: 'The hotel receipt is attached; claim two nights.',
  attachments: [uploaded.id],
})
const earlier = expenses.ask({
  title: 'The receipt total differs from the card statement by 2.10 EUR. Submit anyway?',
  fields: [
    { id: 'submit', type: 'boolean', required: true, label: 'Submit anyway' },
    { id: 'reason', type: 'string', max_length: 300, label: 'Reason, if not' },
  ],
  deadlineS: 200,
})
await asDan('/desktop/expenses-7f3a/mcp/messages', 'POST', {
  run: expenses.run,
  key: 'dan-answer',
  reply_to: earlier.request_id,
  revision: earlier.revision,
  values: { submit: true },
})
const question = expenses.ask({
  title: 'Two receipts match the hotel line. Which one should I attach?',
  help: 'Both are from the same hotel; one is the deposit, one the final bill.',
  fields: [
    {
      id: 'receipt',
      type: 'string',
      required: true,
      enum: ['Deposit, 80.00 EUR', 'Final bill, 246.00 EUR'],
      label: 'Receipt',
    },
    { id: 'nights', type: 'integer', minimum: 0, maximum: 14, label: 'Hotel nights to claim' },
    { id: 'approver_note', type: 'string', max_length: 200, label: 'Note for the approver' },
  ],
  deadlineS: 262,
})
const crm = await session('crm-merge-21', 'finance', {
  app: 'crm',
  goal: 'Merge the duplicate ACME contacts',
})
work(crm, [['click(text="Duplicates")', '14 duplicates listed']])
crm.escalate('the merge needs an approval code sent to a phone')
const billing = await session('billing-export', 'support', {
  app: 'billing',
  goal: 'Export the November invoices as CSV',
})
work(billing, [['click(text="Export")', 'dialog "Export invoices" opened']])
billing.emit('status', {
  phase: 'done',
  verdict: 'test-error',
  outcome: 'escalated',
  summary: 'The export dialog never finished.',
})
billing.closeTrace({ done: true })
const hr = await session('hr-onboarding', 'support', {
  app: 'hr',
  goal: 'Create the onboarding checklist for a new hire',
})
const inventory = await session('inventory-sync', 'support', {
  app: 'inventory',
  goal: 'Sync the stock levels',
})
inventory.setDown(502)

// Dan has the expenses session open and took its question.
const watching = await openSse(`${url}/desktop/expenses-7f3a/mcp/events`, { authorization: `Bearer ${dan}` })
await asDan(
  `/api/sessions/expenses-7f3a/requests/${question.request_id}/claim?run=${encodeURIComponent(expenses.run)}`,
  'PUT',
)
// Its escalation as the engine keeps it: the team's channel at once, Amir a minute later; the pager waits
// while Dan holds it.
const opened = Date.now() - 70_000
const steps: EscalationState = {
  run: expenses.run,
  item: question.request_id,
  openedAt: new Date(opened).toISOString(),
  steps: [
    {
      step: 0,
      afterS: 0,
      state: 'sent',
      at: new Date(opened).toISOString(),
      targets: [{ kind: 'slack', label: 'slack:C04FINANCE', outcome: 'sent' }],
    },
    {
      step: 1,
      afterS: 60,
      state: 'sent',
      at: new Date(opened + 60_000).toISOString(),
      targets: [{ kind: 'person', label: 'person:amir/slack', outcome: 'sent' }],
    },
    {
      step: 2,
      afterS: 150,
      state: 'due',
      at: null,
      targets: [{ kind: 'pagerduty', label: 'pagerduty:finance#2', outcome: 'planned' }],
    },
  ],
  next: null,
}
await app.board.set(
  'expenses-7f3a',
  escalationField(expenses.run, question.request_id),
  JSON.stringify(steps),
)

const written: string[] = []
async function shot(page: Page, name: string, fullPage = false): Promise<void> {
  const path = join(out, `${name}.png`)
  // Countdowns and thumbnails settle, and nothing is mid-transition.
  await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())))')
  await page.screenshot({ path, fullPage })
  written.push(path)
}

// The full browser, as people see the console (the headless shell would say notifications are blocked).
const browser = await launchChromium('browser')
try {
  for (const [width, viewport] of [
    ['desktop', { width: 1366, height: 800 }],
    ['phone', { width: 390, height: 844 }],
  ] as const) {
    if (!widths.has(width)) continue
    for (const scheme of ['light', 'dark'] as const) {
      if (!schemes.has(scheme)) continue
      const context = await browser.newContext({
        viewport,
        deviceScaleFactor: width === 'desktop' ? 1 : 2,
        colorScheme: scheme,
      })
      const page = await context.newPage()
      const name = (view: string) => `${view}-${width}-${scheme}`
      // A run of its own to stop in every pass.
      hr.newRun()
      hr.emit('info', {
        run_id: hr.run,
        agentic: true,
        app: 'hr',
        goal: 'Create the onboarding checklist for a new hire',
      })
      work(hr, [['click(text="New checklist")', 'checklist created']])
      // Signed out, the console sends Carol to the IdP; she signs in and comes back to the overview.
      await signInWithChromium(page, stack.idp.issuer, `${url}/`, { username: 'carol' })
      await page.waitForURL(`${url}/`)
      await page.waitForSelector('.session-row >> text=inventory-sync')
      await page.waitForSelector('.session-row >> text=Watching: Dan')
      await page.waitForSelector('.session-row >> text=Runtime not up yet')
      await page.waitForSelector('.session-row >> text=Dan is on it')
      await shot(page, name('overview'), width === 'desktop')
      // The session with a question opens on it.
      await page.click('.session-row >> text=expenses-7f3a')
      await page.waitForSelector('.question >> text=Two receipts match')
      await page.waitForSelector('.message >> text=receipt-0311.pdf')
      await page.waitForSelector('.message >> text=Responded')
      await shot(page, name('session-inbox'))
      await page.click('#tab-home')
      await shot(page, name('session-home'))
      await page.click('#tab-timeline')
      await shot(page, name('session-timeline'))
      await page.click('#tab-inbox')
      await page.getByRole('button', { name: 'Stop the agent' }).click()
      await shot(page, name('session-stop-confirm'))
      await page.getByRole('button', { name: 'Keep it running' }).click()
      // The handoff opens on the pause, with the Kasm viewer's link.
      await page.getByRole('link', { name: '← All sessions' }).click()
      await page.click('.session-row >> text=crm-merge-21')
      await page.waitForSelector('.handoff-note >> text=Open the session in the Kasm viewer')
      await shot(page, name('session-handoff'))
      await page.getByRole('link', { name: '← All sessions' }).click()
      await page.click('.session-row >> text=hr-onboarding')
      await page.click('#tab-inbox')
      await page.getByRole('button', { name: 'Stop the agent' }).click()
      await page.getByRole('button', { name: 'Yes, stop the agent' }).click()
      await page.waitForSelector('.controls >> text=Stopped by Carol')
      await shot(page, name('session-stopped'))
      // The sign-in pages share the theme.
      await page.goto(`${url}/auth/callback?state=unknown&code=x`)
      await shot(page, name('signin-failed'))
      await page.goto(`${url}/auth/logged-out`)
      await shot(page, name('signed-out'))
      await context.close()
    }
  }
} finally {
  watching.close()
  await browser.close()
  for (const fn of cleanups.reverse()) await fn()
  await Promise.all(runtimes.map((r) => r.close()))
}
// The docs' pictures (README, docs/console.md): the light ones, changed only when asked.
if (args['update-docs']) {
  for (const [from, to] of [
    ['overview-desktop-light', 'console-overview'],
    ['session-inbox-desktop-light', 'console-session'],
    ['overview-phone-light', 'console-overview-phone'],
    ['session-inbox-phone-light', 'console-session-phone'],
  ] as const)
    await copyFile(join(out, `${from}.png`), join(docs, `${to}.png`))
}
process.stdout.write(
  `${written.length} screenshots in ${out}${args['update-docs'] ? `; the docs' four in ${docs}` : ''}\n`,
)
