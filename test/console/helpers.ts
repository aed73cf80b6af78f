import assert from 'node:assert/strict'
import { after, type TestContext } from 'node:test'
import type { Browser, BrowserContext, Cookie, Page } from 'playwright-core'
import type { Role } from '../../src/auth/operator.ts'
import type { DemoPerson } from '../../src/dev/demo-idp.ts'
import type { SimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { TestGateway } from '../helpers/gateway.ts'
import { WAIT_MS, waitFor } from '../helpers/wait.ts'
import { addRuntime, fastEnv } from '../overview/helpers.ts'
import { type SignInStack, signInWithChromium, startSignInStack } from '../signin/harness.ts'

export { addRuntime, TOKEN } from '../overview/helpers.ts'

/** A person, as the identity provider knows them (they sign in with their `sub` as the username). */
export interface Person {
  sub: string
  name: string
  roles: Role[]
  teams: string[]
}

/** A gateway for the console's tests, with the IdP its people sign in through. */
export interface ConsoleGateway extends TestGateway {
  readonly stack: SignInStack
}

/**
 * A gateway with the overview's short timers, signing people in through a real OpenID provider (the demo's,
 * oidc-provider) that knows `people`.
 */
export async function startConsoleGateway(
  t: { after(fn: () => unknown): void },
  options: { people: readonly Person[]; env?: Record<string, string> },
): Promise<ConsoleGateway> {
  const people: DemoPerson[] = options.people.map((p) => ({
    sub: p.sub,
    username: p.sub,
    name: p.name,
    email: `${p.sub}@console.test`,
    roles: p.roles,
    teams: p.teams,
  }))
  const stack = await startSignInStack(t, {
    env: { ...fastEnv, GATEWAY_STREAM_LINGER_MS: '2000', ...options.env },
    idp: { people },
  })
  return { app: stack.app, url: stack.origin, stack, close: () => stack.app.close() }
}

/**
 * One console gateway (and its IdP) for every test of a file whose tests need nothing of their own from it:
 * call at the file's top level, then `await gateway()` in each test. Started on first use, closed after the
 * process's last test (the file's, or its shard's: scripts/run-tests.mjs). Each test registers its sessions with {@link addSharedRuntime}, under names of its own.
 * With `signIn`'s `reuse`, only the file's first sign-in of a person goes through the IdP's forms.
 */
export function consoleGatewayPerFile(options: {
  people: readonly Person[]
  env?: Record<string, string>
}): () => Promise<ConsoleGateway> {
  const cleanups: (() => unknown)[] = []
  let started: Promise<ConsoleGateway> | undefined
  after(async () => {
    for (const cleanup of cleanups) await cleanup()
  })
  return () => {
    started ??= startConsoleGateway({ after: (fn) => cleanups.push(fn) }, options)
    return started
  }
}

/**
 * {@link addRuntime} on a gateway the file shares ({@link consoleGatewayPerFile}): the session is removed when
 * the test ends, so that no later test's console shows it, and the gateway stops reading a runtime that closed.
 */
export async function addSharedRuntime(
  t: TestContext,
  gw: ConsoleGateway,
  kasmId: string,
  team: string,
  options: Parameters<typeof addRuntime>[4] = {},
): Promise<SimulatedRuntime> {
  t.after(() => gw.app.sessions.remove(kasmId))
  return addRuntime(t, gw, kasmId, team, options)
}

/** Cookies (the gateway's session, the IdP's) of each person's first sign-in, by gateway: see `reuse`. */
const signedInBefore = new WeakMap<ConsoleGateway, Map<string, Cookie[]>>()

/**
 * Opens `path` (the console's home by default) signed out, as a person would: the console sends them to the
 * IdP, they sign in as `person` (the first time in this browser context; later the IdP remembers them), and
 * come back to `path`. Fails the test on any page error: the console must
 * never throw.
 */
export async function signIn(
  t: TestContext,
  b: Browser,
  gw: ConsoleGateway,
  person: Person,
  options: {
    path?: string
    viewport?: { width: number; height: number }
    context?: BrowserContext
    /** Called before the first navigation (to listen to every request of the page). */
    before?: (page: Page) => void
    /**
     * Signed in already: the new context gets the cookies of `person`'s first sign-in on this gateway and opens
     * `path` directly (the first sign-in goes through the IdP as above). The IdP's forms cost seconds on a
     * loaded machine; only a test about signing in needs them every time.
     */
    reuse?: boolean
  } = {},
): Promise<Page> {
  const context =
    options.context ?? (await b.newContext({ viewport: options.viewport ?? { width: 1366, height: 800 } }))
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  t.after(() => assert.deepEqual(errors, [], 'the console threw'))
  options.before?.(page)
  const [path = '/', hash] = (options.path ?? '/').split('#')
  const known = signedInBefore.get(gw) ?? new Map<string, Cookie[]>()
  signedInBefore.set(gw, known)
  const cookies = options.reuse === true ? known.get(person.sub) : undefined
  if (cookies !== undefined) {
    await context.addCookies(cookies)
    await page.goto(`${gw.url}${options.path ?? '/'}`)
    assert.equal(page.url(), `${gw.url}${options.path ?? '/'}`, 'still signed in')
  } else {
    const status = await signInWithChromium(page, gw.stack.idp.issuer, `${gw.url}${path}`, {
      username: person.sub,
    })
    assert.equal(status, 303, 'signed in')
    await page.waitForURL(`${gw.url}${path}`)
    if (!known.has(person.sub)) known.set(person.sub, await context.cookies())
    // A fragment (a tab) does not survive the IdP's forms: the person opens the deep link again.
    if (hash !== undefined) await page.goto(`${gw.url}${path}#${hash}`)
  }
  await page.waitForSelector('#app > :not(.boot)')
  return page
}

/**
 * Asserts that `text` ends with what is left of a pause of `pauseS` seconds that started at `since`
 * (`Date.now()` taken before it started), "m:ss" then a full stop: no more than the whole pause, and no less than
 * what was left of it just now, however long a loaded machine took to get here.
 */
export function assertTimeLeft(text: string, pauseS: number, since: number): void {
  const shown = /(\d+):(\d\d)\.$/.exec(text)
  assert.ok(shown, `no time left in "${text}"`)
  const left = Number(shown[1]) * 60 + Number(shown[2])
  const elapsed = (Date.now() - since) / 1000
  assert.ok(
    left <= pauseS && left >= pauseS - elapsed - 1,
    `"${text}": ${left} s left of a ${pauseS} s pause that started ${elapsed} s ago`,
  )
}

/** Waits until nothing is scheduled in the page (two animation frames): what the console renders is on screen. */
export async function settled(page: Page): Promise<void> {
  await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())))')
}

let recorded = 0

/**
 * Starts recording in the page whether `expression` is ever truthy from now on (checked at every change of the
 * document), and returns the wait for it. For a state the page shows only briefly ("Stopping…" for two of the
 * runtime's steps): a wait that starts looking later, as one may on a loaded machine, could miss it.
 */
export async function recordSeen(page: Page, expression: string): Promise<() => Promise<void>> {
  const flag = `__seen${++recorded}`
  await page.evaluate(`(() => {
    const check = () => {
      if (!(${expression})) return
      window.${flag} = true
      observer.disconnect()
    }
    const observer = new MutationObserver(check)
    observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true })
    check()
  })()`)
  return () => until(page, `window.${flag} === true`)
}

/**
 * Waits until `expression` is truthy in the page. Evaluated through the DevTools protocol each time (the
 * page's CSP forbids the `eval` that Playwright's waitForFunction uses for a string).
 */
export async function until(page: Page, expression: string, timeoutMs = WAIT_MS): Promise<void> {
  await waitFor(expression, async () => Boolean(await page.evaluate(expression)), timeoutMs)
}
