import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { after } from 'node:test'
import type { Request, Response } from 'playwright-core'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { WAIT_MS } from './wait.ts'

/**
 * Debian's two builds of Chromium, the same Blink and V8; CI installs both (`.ci/run`). Browsers are never
 * downloaded.
 *
 * - `shell` (package `chromium-headless-shell`, `CHROMIUM_SHELL_PATH` to override): the headless shell, what
 *   Playwright itself runs for headless tests. Pages render and behave as in the browser, for a third of the CPU: the
 *   browser's headless mode runs the whole browser around each page (CONTRIBUTING.md, "Where the time goes").
 *   Every test uses it unless it is about something only a browser window does.
 * - `browser` (package `chromium`, `CHROMIUM_PATH`): the full browser, for what the shell has no window for: it
 *   fetches a page's icon, and its notification permission starts at `default` (the shell's is `denied`), so the
 *   console offers "Turn on notifications" as it does to a person. The docs' screenshots use it too.
 */
export const CHROMIUM = {
  shell: process.env.CHROMIUM_SHELL_PATH ?? '/usr/bin/chromium-headless-shell',
  browser: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
} as const

/** Which of {@link CHROMIUM}'s builds. */
export type ChromiumBuild = keyof typeof CHROMIUM

/**
 * Launches headless Chromium (the {@link CHROMIUM} `build`, the shell by default) with the flags this closed
 * network needs. Close it when done. Every context it opens (a page of its own included) waits {@link WAIT_MS}
 * for an action, a selector or a navigation instead of Playwright's 30 s: a loaded 2-core run has taken longer
 * than that to render a console page.
 */
export async function launchChromium(build: ChromiumBuild = 'shell'): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM[build],
    // SIGHUP is the gateway's reload signal, and tests send it to their own process (process.emit): Playwright
    // would take it as an order to close every browser of the process, a shard's shared one included.
    handleSIGHUP: false,
    // Under the test timeout: a launch that hangs fails as itself, not as a silent file timeout.
    timeout: WAIT_MS,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
  browser.on('context', (context) => context.setDefaultTimeout(WAIT_MS))
  return browser
}

/** A Chromium for one test, closed by `t.after`. Files share one: {@link sharedChromium}. */
export async function chromiumFor(
  t: { after(fn: () => unknown): void },
  build: ChromiumBuild = 'shell',
): Promise<Browser> {
  const browser = await launchChromium(build)
  t.after(() => browser.close())
  return browser
}

/** The process's Chromium of each build, launched on first use: see {@link sharedChromium}. */
const launched = new Map<ChromiumBuild, Promise<Browser>>()

/**
 * One Chromium (of `build`, the shell by default) for every test of the process (a launch costs seconds of CPU):
 * call this at the file's top level, then `await chromium(t)` in each test. The browser is launched on first use
 * and closed after the process's last test: the file's, or the shard's when files share a process
 * (scripts/run-tests.mjs). The contexts a test opens (its pages with them) are closed when that test ends, so
 * nothing of one test lives on into the next.
 */
export function sharedChromium(
  build: ChromiumBuild = 'shell',
): (t: { after(fn: () => unknown): void }) => Promise<Browser> {
  after(async () => {
    const browser = await launched.get(build)?.catch(() => undefined)
    launched.delete(build)
    await browser?.close()
  })
  return async (t) => {
    const launching = launched.get(build) ?? launchChromium(build)
    launched.set(build, launching)
    const open = await launching
    const earlier = new Set(open.contexts())
    t.after(() =>
      Promise.all(
        open
          .contexts()
          .filter((c) => !earlier.has(c))
          .map((c) => c.close()),
      ),
    )
    return open
  }
}

const axeSource = readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/**
 * Runs axe-core on the page and asserts it found no violation. It is evaluated through the DevTools
 * protocol, which the page's own CSP does not govern, so the page is checked under its real policy (a page
 * that runs no script at all included).
 */
export async function assertAccessible(page: Page, what: string): Promise<void> {
  // Once per document: the console's views change without loading a new one, and axe-core is 650 KB of script
  // to parse.
  if ((await page.evaluate('typeof axe')) === 'undefined') await page.evaluate(await axeSource)
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as {
    passes: unknown[]
    violations: {
      id: string
      impact: string
      help: string
      nodes: { target: string[]; failureSummary: string }[]
    }[]
  }
  assert.ok(result.passes.length > 10, `axe-core ran its rules on ${what}`)
  const problems = result.violations.map(
    (v) =>
      `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`).join('\n  ')}`,
  )
  assert.deepEqual(problems, [], `axe-core violations on ${what}`)
}

/** Collects what a page's CSP refuses from now on (Chromium reports each refusal on the page's console). */
export function cspRefusals(page: Page): string[] {
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text())
  })
  return refused
}

/**
 * Records everything a page (or every page of a context) could ever hold from now on: request URLs and headers,
 * response headers and bodies (event streams' bodies are never finished, so not read). For asserting that a
 * secret never reached the browser. A request or response still in flight when its page closes has no headers
 * to give (Playwright rejects): there is nothing it could hold, so that is not a failure.
 */
export function recordTraffic(target: Page | BrowserContext): string[] {
  const seen: string[] = []
  const on = target.on.bind(target) as {
    (event: 'request', fn: (r: Request) => void): void
    (event: 'response', fn: (r: Response) => void): void
  }
  on('request', (request) => {
    seen.push(request.url())
    request.allHeaders().then(
      (h) => seen.push(JSON.stringify(h)),
      () => {},
    )
  })
  on('response', (response) => {
    response.allHeaders().then(
      (h) => seen.push(JSON.stringify(h)),
      () => {},
    )
    if (!response.headers()['content-type']?.includes('event-stream'))
      response.text().then(
        (body) => seen.push(body),
        () => {},
      )
  })
  return seen
}
