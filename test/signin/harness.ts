import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import type { Page } from 'playwright-core'
import { fetch, getSetCookies } from 'undici'
import { type AppOptions, buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { type DemoIdp, type DemoIdpOptions, gatewayClient, startDemoIdp } from '../../src/dev/demo-idp.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { testEnv } from '../helpers/jwt.ts'
import { WAIT_MS } from '../helpers/wait.ts'

/**
 * Sign-in tests run the whole flow for real: the demo's OpenID provider (oidc-provider), a gateway configured
 * as its confidential client, and {@link Browser}, an HTTP client with a cookie jar that follows redirects and
 * fills in the IdP's forms as a person would. Chromium drives the same flow in test/e2e.
 */

export const CLIENT_ID = 'kasm-runtime-gateway'
export const CLIENT_SECRET = 'client-secret-for-sign-in-tests'
export const PASSWORD = 'demo-password-for-tests'

/** What a test (or a script) gives to be told what to undo at its end: node:test's context will do. */
export interface Cleanup {
  after(fn: () => unknown): void
}

/** A gateway signed in through a real IdP. */
export interface SignInStack {
  readonly idp: DemoIdp
  readonly app: FastifyInstance
  /** The gateway's origin, e.g. `http://127.0.0.1:41234`. */
  readonly origin: string
  /** origin + GATEWAY_BASE_PATH. */
  readonly base: string
}

/** Options of {@link startSignInStack}. */
export interface SignInStackOptions {
  readonly env?: Record<string, string>
  readonly idp?: DemoIdpOptions
  /** Start the gateway with an issuer where nothing answers (the IdP is down from the start). */
  readonly issuer?: string
  /** buildApp's options (a test's `onRoute`, say). */
  readonly app?: AppOptions
}

/** Starts the IdP and a gateway on a port chosen first (the IdP must know the redirect URI). */
export async function startSignInStack(t: Cleanup, options: SignInStackOptions = {}): Promise<SignInStack> {
  const idp = await startDemoIdp({ password: PASSWORD, ...options.idp })
  t.after(() => idp.close())
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const env = testEnv({
    GATEWAY_PUBLIC_ORIGIN: origin,
    GATEWAY_OIDC_ISSUER: options.issuer ?? idp.issuer,
    GATEWAY_OIDC_CLIENT_ID: CLIENT_ID,
    GATEWAY_OIDC_CLIENT_SECRET: CLIENT_SECRET,
    // The IdP answers from this busy process (the gateway's and Chromium's traffic beside it): no call to it may
    // time out before a condition would. An IdP that is down refuses at once, so no test waits for this.
    GATEWAY_OIDC_TIMEOUT_MS: String(WAIT_MS),
    ...options.env,
  })
  const config = loadConfig(env)
  const app = await buildApp(config, options.app)
  await app.listen({ port, host: '127.0.0.1' })
  t.after(() => app.close())
  const base = `${origin}${config.basePath}`
  idp.setClient(gatewayClient(base, CLIENT_ID, CLIENT_SECRET))
  return { idp, app, origin, base }
}

/**
 * Another replica of `stack`'s gateway (the same public origin, IdP client and `env`, e.g. a shared Redis) on a
 * port of its own; closed by `t.after`. Returns its origin.
 */
export async function startReplicaOf(
  t: Cleanup,
  stack: SignInStack,
  env: Record<string, string>,
): Promise<{ app: FastifyInstance; origin: string }> {
  const port = await freePort()
  const app = await buildApp(
    loadConfig(
      testEnv({
        GATEWAY_PUBLIC_ORIGIN: stack.origin,
        GATEWAY_OIDC_ISSUER: stack.idp.issuer,
        GATEWAY_OIDC_CLIENT_ID: CLIENT_ID,
        GATEWAY_OIDC_CLIENT_SECRET: CLIENT_SECRET,
        ...env,
      }),
    ),
  )
  await app.listen({ port, host: '127.0.0.1' })
  t.after(() => app.close())
  return { app, origin: `http://127.0.0.1:${port}` }
}

/** One answer as the browser saw it. */
export interface Visit {
  readonly url: string
  readonly status: number
  readonly location: string | null
  readonly headers: Headers
  readonly text: string
}

/**
 * A browser, as far as these flows need one: a cookie jar (every service is on 127.0.0.1, and cookies ignore
 * ports, so one jar by name), navigation headers, redirects followed by hand so every hop can be looked at.
 */
export class Browser {
  readonly cookies = new Map<string, string>()
  /** Every URL visited, in order. */
  readonly visited: string[] = []
  /** `Sec-Fetch-Site` for every request, as when the IdP is on another site (else computed from the origins). */
  site: string | undefined
  #last: string | null = null

  /** One request, no redirect followed. */
  async request(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<Visit> {
    const site =
      this.site ??
      (this.#last === null
        ? 'none'
        : new URL(this.#last).origin === new URL(url).origin
          ? 'same-origin'
          : 'same-site')
    const headers: Record<string, string> = {
      accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
      'sec-fetch-mode': 'navigate',
      'sec-fetch-dest': 'document',
      'sec-fetch-site': site,
    }
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
    if (init.form !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      headers.origin = new URL(this.#last ?? url).origin
    }
    const res = await fetch(url, {
      method: init.method ?? (init.form === undefined ? 'GET' : 'POST'),
      headers,
      redirect: 'manual',
      ...(init.form === undefined ? {} : { body: new URLSearchParams(init.form).toString() }),
    })
    for (const c of getSetCookies(res.headers)) {
      const expired =
        c.maxAge !== undefined
          ? c.maxAge <= 0
          : c.expires !== undefined && new Date(c.expires).getTime() < Date.now()
      if (expired || c.value === '') this.cookies.delete(c.name)
      else this.cookies.set(c.name, c.value)
    }
    this.visited.push(url)
    this.#last = url
    const location = res.headers.get('location')
    return {
      url,
      status: res.status,
      location: location === null ? null : new URL(location, url).href,
      headers: res.headers,
      text: await res.text(),
    }
  }

  /** Follows redirects from `url` until an answer that is not one, or until `stop` says so. */
  async navigate(url: string, stop: (next: string) => boolean = () => false): Promise<Visit> {
    let visit = await this.request(url)
    for (let hops = 0; visit.location !== null && visit.status >= 300 && visit.status < 400; hops++) {
      assert.ok(hops < 20, `redirect loop from ${url}`)
      if (stop(visit.location)) return visit
      visit = await this.request(visit.location)
    }
    return visit
  }

  /** Submits the first form of `page` whose action ends with `suffix`, then follows redirects. */
  async submit(
    page: Visit,
    suffix: string,
    fields: Record<string, string> = {},
    stop?: (next: string) => boolean,
  ) {
    const action = [...page.text.matchAll(/<form[^>]*action="([^"]+)"/g)]
      .map((m) => m[1]!)
      .find((a) => a.endsWith(suffix))
    assert.ok(action, `no form ending ${suffix} in ${page.url}:\n${page.text}`)
    const hidden = Object.fromEntries(
      [...page.text.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    )
    let visit = await this.request(new URL(action.replaceAll('&amp;', '&'), page.url).href, {
      form: { ...hidden, ...fields },
    })
    if (visit.location !== null && !stop?.(visit.location)) visit = await this.navigate(visit.location, stop)
    return visit
  }
}

/** How a person answers the IdP in {@link signInAt}. */
export interface SignInAnswers {
  readonly username?: string
  readonly password?: string
  readonly consent?: 'allow' | 'deny'
  readonly returnTo?: string
  /** Stop before the gateway's callback and return the redirect to it (for replay and tampering tests). */
  readonly stopAtCallback?: boolean
}

/**
 * Signs in through the IdP as a person would: `auth/login`, the IdP's login form, its consent page (when it
 * asks), and back to the gateway. Returns the last answer: the page `return_to` led to, or, with
 * `stopAtCallback`, the redirect to the callback.
 */
export async function signInAt(
  stack: SignInStack,
  browser: Browser,
  answers: SignInAnswers = {},
): Promise<Visit> {
  const callback = `${stack.base}auth/callback`
  const stop = (next: string) => answers.stopAtCallback === true && next.startsWith(callback)
  const query = answers.returnTo === undefined ? '' : `?return_to=${encodeURIComponent(answers.returnTo)}`
  let page = await browser.navigate(`${stack.base}auth/login${query}`, stop)
  if (page.text.includes('/login"')) {
    page = await browser.submit(
      page,
      '/login',
      { username: answers.username ?? 'olivia', password: answers.password ?? PASSWORD },
      stop,
    )
  }
  if (page.text.includes('/consent"'))
    page = await browser.submit(page, answers.consent === 'deny' ? '/deny' : '/consent', {}, stop)
  return page
}

/**
 * Signs in through the IdP in Chromium, as a person would: opens `url` (`auth/login`, or a page that sends a
 * signed-out person there), fills in the IdP's login form and answers its consent page when it asks (neither
 * shows when this browser is signed in at the IdP already and allowed access before). Returns the status of
 * the gateway's callback; the page is then wherever the callback led.
 */
export async function signInWithChromium(
  page: Page,
  issuer: string,
  url: string,
  answers: Pick<SignInAnswers, 'username' | 'password' | 'consent'> = {},
): Promise<number> {
  const callback = page.waitForResponse((r) => new URL(r.url()).pathname.endsWith('/auth/callback'))
  await page.goto(url)
  const asks = async (selector: string) =>
    page.url().startsWith(issuer) && (await page.locator(selector).count()) > 0
  if (await asks('#username')) {
    await page.fill('#username', answers.username ?? 'olivia')
    await page.fill('#password', answers.password ?? PASSWORD)
    await Promise.all([page.waitForNavigation(), page.click('button:has-text("Sign in")')])
  }
  if (await asks('button:has-text("Allow")')) {
    const button = answers.consent === 'deny' ? 'Deny' : 'Allow'
    await Promise.all([page.waitForNavigation(), page.click(`button:has-text("${button}")`)])
  }
  return (await callback).status()
}

/** A new browser signed in through the IdP ({@link signInAt}), and its gateway session cookie. */
export async function signedIn(
  stack: SignInStack,
  answers: SignInAnswers = {},
): Promise<{ browser: Browser; cookie: string }> {
  const browser = new Browser()
  await signInAt(stack, browser, answers)
  return { browser, cookie: sessionCookie(browser) }
}

/** The `name=value` Cookie header of the gateway's session cookie in `browser`. */
export function sessionCookie(browser: Browser): string {
  const value = browser.cookies.get('krg_session')
  assert.ok(value, `no session cookie: ${[...browser.cookies.keys()].join(', ')}`)
  return `krg_session=${value}`
}
