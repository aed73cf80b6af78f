/**
 * `npm run screenshots`: the README's pictures of the console (docs/console-*.png), made in Chromium from a
 * real gateway and simulated runtimes in a state a support lead would recognise, signed in through a real
 * OpenID provider as a person is. Not a test: run it after changing the page, then look at every picture.
 */
import { fileURLToPath } from 'node:url'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { openSse } from '../events/helpers.ts'
import { launchChromium } from '../helpers/chromium.ts'
import { bearer } from '../helpers/jwt.ts'
import { signInWithChromium, startSignInStack } from '../signin/harness.ts'

const TOKEN = 'screenshots-messaging-token'
const docs = fileURLToPath(new URL('../../docs/', import.meta.url))

const cleanups: (() => unknown)[] = []
const stack = await startSignInStack(
  { after: (fn) => void cleanups.push(fn) },
  {
    env: { GATEWAY_PRESENCE_TTL_MS: '1000' },
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
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN, kasmId, escalationPauseS: 900 })
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
work(hr, [['click(text="New checklist")', 'checklist created']])
hr.emit('status', { phase: 'done', verdict: 'pass', outcome: 'passed', summary: 'Checklist created.' })
hr.closeTrace({ done: true })
const inventory = await session('inventory-sync', 'support', {
  app: 'inventory',
  goal: 'Sync the stock levels',
})
inventory.setDown(502)

// Dan has the expenses session open and took its question.
const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['finance', 'support'] })
const watching = await openSse(`${url}/desktop/expenses-7f3a/mcp/events`, { authorization: `Bearer ${dan}` })
await fetch(
  `${url}/api/sessions/expenses-7f3a/requests/${question.request_id}/claim?run=${encodeURIComponent(expenses.run)}`,
  { method: 'PUT', headers: { authorization: `Bearer ${dan}` } },
)

const browser = await launchChromium()
try {
  for (const [suffix, viewport] of [
    ['', { width: 1366, height: 800 }],
    ['-phone', { width: 390, height: 844 }],
  ] as const) {
    const context = await browser.newContext({ viewport, deviceScaleFactor: suffix === '' ? 1 : 2 })
    const page = await context.newPage()
    // Signed out, the console sends Carol to the IdP; she signs in and comes back to the overview.
    await signInWithChromium(page, stack.idp.issuer, `${url}/`, { username: 'carol' })
    await page.waitForURL(`${url}/`)
    await page.waitForSelector('.session-row >> text=inventory-sync')
    await page.waitForSelector('.session-row >> text=Watching: Dan')
    await page.waitForSelector('.session-row >> text=Runtime not up yet')
    await page.waitForSelector('.session-row >> text=Dan is on it')
    await page.screenshot({ path: `${docs}console-overview${suffix}.png`, fullPage: suffix === '' })
    await page.click('.session-row >> text=expenses-7f3a')
    await page.click('#tab-inbox')
    await page.waitForSelector('.question')
    await page.screenshot({ path: `${docs}console-session${suffix}.png`, fullPage: false })
    await context.close()
  }
} finally {
  watching.close()
  await browser.close()
  for (const fn of cleanups.reverse()) await fn()
  await Promise.all(runtimes.map((r) => r.close()))
}
process.stdout.write(`screenshots written to ${docs}\n`)
