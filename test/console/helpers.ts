import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import type { TestContext } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Role } from '../../src/auth/operator.ts'
import { launchChromium } from '../helpers/chromium.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { fastEnv } from '../overview/helpers.ts'

export { addRuntime, TOKEN } from '../overview/helpers.ts'

/** A gateway for a browser (cookie sign-in from its own origin) with the overview's short timers. */
export async function startConsoleGateway(
  t: TestContext,
  env: Record<string, string> = {},
): Promise<TestGateway> {
  const gw = await startGateway({
    ...fastEnv,
    GATEWAY_PUBLIC_ORIGIN: '',
    GATEWAY_STREAM_LINGER_MS: '2000',
    ...env,
  })
  t.after(() => gw.close())
  return gw
}

/** One Chromium per test file is plenty; closed by `t.after`. */
export async function browser(t: TestContext): Promise<Browser> {
  const b = await launchChromium()
  t.after(() => b.close())
  return b
}

/** A person, as the sign-in would make them. */
export interface Person {
  sub: string
  name: string
  roles: Role[]
  teams: string[]
}

/**
 * Signs a person in through the one-time login link and returns their page at `path` (the console's home by
 * default). Fails the test on any page error: the console must never throw.
 */
export async function signIn(
  t: TestContext,
  b: Browser,
  gw: TestGateway,
  person: Person,
  options: {
    path?: string
    viewport?: { width: number; height: number }
    context?: BrowserContext
    /** Called before the first navigation (to listen to every request of the page). */
    before?: (page: Page) => void
  } = {},
): Promise<Page> {
  const context =
    options.context ?? (await b.newContext({ viewport: options.viewport ?? { width: 1366, height: 800 } }))
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  t.after(() => assert.deepEqual(errors, [], 'the console threw'))
  options.before?.(page)
  const ticket = gw.app.auth.issueLoginTicket(person)
  await page.goto(`${gw.url}/auth/login?ticket=${ticket}`)
  await page.waitForSelector('#app > :not(.boot)')
  if (options.path !== undefined && options.path !== '/') {
    await page.goto(`${gw.url}${options.path}`)
    await page.waitForSelector('#app > :not(.boot)')
  }
  return page
}

const axeSource = readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** Runs axe-core in the page (evaluated, so the page's CSP applies to the page, not to the test) and asserts no violation. */
export async function assertAccessible(page: Page, what: string): Promise<void> {
  await page.evaluate(await axeSource)
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as {
    violations: {
      id: string
      impact: string
      help: string
      nodes: { target: string[]; failureSummary: string }[]
    }[]
  }
  const problems = result.violations.map(
    (v) =>
      `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`).join('\n  ')}`,
  )
  assert.deepEqual(problems, [], `axe-core violations on ${what}`)
}

/** Waits until nothing is scheduled in the page (two animation frames): what the console renders is on screen. */
export async function settled(page: Page): Promise<void> {
  await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())))')
}

/**
 * Waits until `expression` is truthy in the page. Evaluated through the DevTools protocol each time (the
 * page's CSP forbids the `eval` that Playwright's waitForFunction uses for a string).
 */
export async function until(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  await waitFor(expression, async () => Boolean(await page.evaluate(expression)), timeoutMs)
}
