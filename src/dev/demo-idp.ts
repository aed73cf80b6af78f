import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import Provider, {
  type Adapter,
  type AdapterFactory,
  type AdapterPayload,
  type Configuration,
  type KoaContextWithOIDC,
} from 'oidc-provider'
import { escapeHtml, htmlDocument } from '../pages/document.ts'

/**
 * A real OpenID provider (panva's oidc-provider) for the demo and the tests: authorization code with PKCE,
 * refresh tokens, userinfo, RP-initiated and back-channel logout, with a login form, a consent page and a
 * sign-out confirmation of its own (no script, no inline style). Never started in production: `npm start`
 * runs it only with the demo, and the container image does not even contain oidc-provider (a dev dependency).
 */

/** Someone the demo IdP can sign in. */
export interface DemoPerson {
  readonly sub: string
  /** What they type to sign in. */
  readonly username: string
  readonly name: string
  readonly email: string
  readonly roles?: readonly string[]
  readonly teams?: readonly string[]
  /** Group names, for gateways that map groups to roles (GATEWAY_OIDC_GROUP_MAP). */
  readonly groups?: readonly string[]
  /** A disabled person cannot sign in, and their refresh tokens are refused. */
  readonly disabled?: boolean
  /**
   * Claims of their own, released with `openid` (the tests' stand-in for Sign in with Slack gives
   * `https://slack.com/team_id` and `https://slack.com/user_id`).
   */
  readonly extraClaims?: Readonly<Record<string, string>>
}

/** The demo's two people: an operator of teams blue and red, and a viewer of team blue. */
export const DEMO_PEOPLE: readonly DemoPerson[] = [
  {
    sub: 'olivia',
    username: 'olivia',
    name: 'Olivia Operator',
    email: 'olivia@demo.invalid',
    roles: ['operator'],
    teams: ['blue', 'red'],
  },
  {
    sub: 'victor',
    username: 'victor',
    name: 'Victor Viewer',
    email: 'victor@demo.invalid',
    roles: ['viewer'],
    teams: ['blue'],
  },
]

/** The relying party (the gateway) the IdP knows: a confidential client. */
export interface DemoClient {
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUris: readonly string[]
  readonly postLogoutRedirectUris: readonly string[]
  /** Where the IdP posts logout tokens (OpenID Connect Back-Channel Logout 1.0). */
  readonly backchannelLogoutUri?: string
}

/**
 * The gateway at `base` (its public origin and base path, e.g. `https://kasm.example/gateway/`) as a client:
 * its callback, signed-out page and back-channel logout route, as a team registers them at its IdP.
 */
export function gatewayClient(base: string, clientId: string, clientSecret: string): DemoClient {
  return {
    clientId,
    clientSecret,
    redirectUris: [`${base}auth/callback`],
    postLogoutRedirectUris: [`${base}auth/logged-out`],
    backchannelLogoutUri: `${base}auth/backchannel-logout`,
  }
}

/** Options of {@link startDemoIdp}. */
export interface DemoIdpOptions {
  /** Listen address; default 127.0.0.1. */
  readonly host?: string
  /** Listen port; default 0 (any free one). */
  readonly port?: number
  /** The host name in the issuer when it is not given (default: the listen address). */
  readonly issuerHost?: string
  /**
   * The issuer, when the IdP is reached through a proxy (e.g. `http://kasm.example/idp`); its path is where the
   * IdP serves. Default `http://<host>:<port>` as it listens.
   */
  readonly issuer?: string
  /** Default {@link DEMO_PEOPLE}. */
  readonly people?: readonly DemoPerson[]
  /** Every person's password; default a random one (see {@link DemoIdp.password}). */
  readonly password?: string
  /**
   * Where roles, teams and groups are released: in the ID token (default) or only from userinfo, as IdPs
   * that keep ID tokens small do.
   */
  readonly claimsIn?: 'id_token' | 'userinfo'
  /** Issue refresh tokens (default true). */
  readonly refreshTokens?: boolean
  /** Called each time the IdP shows its login form (the demo says again how to sign in, once). */
  readonly onLoginForm?: () => void
}

/** A running demo IdP. */
export interface DemoIdp {
  readonly issuer: string
  /** Where it listens (the issuer's origin unless a proxy stands in front). */
  readonly url: string
  readonly password: string
  /** Registers (or replaces) the relying party; until then every request answers 503. */
  setClient(client: DemoClient): void
  /** Changes a person (roles, groups, disabled): what the next sign-in or refresh sees. */
  updatePerson(sub: string, changes: Partial<Omit<DemoPerson, 'sub'>>): void
  /** How many token requests the IdP answered, by grant type (tests). */
  readonly grants: Map<string, number>
  /** Signs a JWT with the IdP's own key, as it signs its tokens (tests build logout tokens with it). */
  sign(payload: Record<string, unknown>, header?: Record<string, unknown>): Promise<string>
  close(): Promise<void>
}

/** Starts the IdP's HTTP server; register the gateway with {@link DemoIdp.setClient}. */
export async function startDemoIdp(options: DemoIdpOptions = {}): Promise<DemoIdp> {
  const people = new Map((options.people ?? DEMO_PEOPLE).map((p) => [p.sub, { ...p }]))
  const password = options.password ?? randomBytes(9).toString('base64url')
  const grants = new Map<string, number>()
  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const jwk = {
    ...(await exportJWK(privateKey)),
    alg: 'RS256',
    use: 'sig',
    kid: randomBytes(6).toString('hex'),
  }
  const cookieKeys = [randomBytes(32).toString('base64url')]
  const storage = memoryStorage()
  let provider: Provider | null = null
  let issuer = options.issuer ?? ''
  let mountPath = ''

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) page(res, 500, 'Something went wrong', `<p>${escapeHtml(String(err))}</p>`)
      else res.destroy()
    })
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://idp.invalid')
    if (!url.pathname.startsWith(`${mountPath}/`) && url.pathname !== mountPath) {
      return page(res, 404, 'Not found', '<p>Nothing here.</p>')
    }
    const path = url.pathname.slice(mountPath.length) || '/'
    if (path === '/demo-idp.css') {
      res.writeHead(200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'max-age=3600' })
      return void res.end(STYLESHEET)
    }
    // favicon.ico too: where a browser looks when a document names no icon (the provider's JSON answers).
    if (path === '/favicon.svg' || path === '/favicon.ico') {
      res.writeHead(200, { 'content-type': 'image/svg+xml', 'cache-control': 'max-age=3600' })
      return void res.end(ICON)
    }
    if (provider === null)
      return page(res, 503, 'Not ready', '<p>The relying party is not registered yet.</p>')
    const interaction = /^\/interaction\/([A-Za-z0-9_-]+)(\/login|\/consent|\/deny)?$/.exec(path)
    if (interaction)
      return interact(provider, req, res, interaction[2] ?? '')
      // oidc-provider serves under its issuer's path: hand it the rest, telling it where it is mounted.
    ;(req as IncomingMessage & { originalUrl?: string }).originalUrl = req.url
    req.url = `${path}${url.search}`
    await provider.callback()(req, res)
  }

  async function interact(
    p: Provider,
    req: IncomingMessage,
    res: ServerResponse,
    step: string,
  ): Promise<void> {
    const details = await p.interactionDetails(req, res)
    const { uid, prompt, params } = details
    const action = `${mountPath}/interaction/${uid}`
    if (step === '' && req.method === 'GET') {
      if (prompt.name === 'login') {
        options.onLoginForm?.()
        return page(res, 200, 'Sign in', loginForm(action))
      }
      return page(res, 200, 'Allow access', consentForm(action, String(params.client_id ?? '')))
    }
    if (req.method !== 'POST') return page(res, 405, 'Not allowed', '<p>Use the form.</p>')
    const form = new URLSearchParams(await readBody(req))
    if (step === '/login') {
      const person = [...people.values()].find((x) => x.username === form.get('username'))
      if (person === undefined || person.disabled || form.get('password') !== password) {
        return page(res, 200, 'Sign in', loginForm(action, 'Wrong username or password.'))
      }
      return p.interactionFinished(
        req,
        res,
        { login: { accountId: person.sub } },
        { mergeWithLastSubmission: false },
      )
    }
    if (step === '/deny') {
      return p.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'the person did not allow access' },
        { mergeWithLastSubmission: false },
      )
    }
    // Consent: grant exactly what the relying party asked for.
    const accountId = details.session?.accountId
    if (accountId === undefined) return page(res, 400, 'Start again', '<p>This sign-in has no account.</p>')
    const grant = details.grantId
      ? await p.Grant.find(details.grantId)
      : new p.Grant({ accountId, clientId: String(params.client_id) })
    if (grant === undefined) return page(res, 400, 'Start again', '<p>This sign-in has expired.</p>')
    const missing = prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[] }
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '))
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims)
    const grantId = await grant.save()
    return p.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true })
  }

  server.listen(options.port ?? 0, options.host ?? '127.0.0.1')
  // Rejects on the listen's 'error' (a HOST not on this machine): the boot says it in one line.
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  issuer ||= `http://${options.issuerHost ?? options.host ?? '127.0.0.1'}:${port}`
  mountPath = new URL(issuer).pathname.replace(/\/$/, '')
  const claimScopes = ['name', 'preferred_username', 'roles', 'teams', 'groups']
  const extraClaims = [...new Set([...people.values()].flatMap((p) => Object.keys(p.extraClaims ?? {})))]

  return {
    issuer,
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    password,
    grants,
    sign: (payload, header = {}) =>
      new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: jwk.kid, ...header }).sign(privateKey),
    setClient(client) {
      const configuration: Configuration = {
        clients: [
          {
            client_id: client.clientId,
            client_secret: client.clientSecret,
            redirect_uris: [...client.redirectUris],
            post_logout_redirect_uris: [...client.postLogoutRedirectUris],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
            ...(client.backchannelLogoutUri === undefined
              ? {}
              : {
                  backchannel_logout_uri: client.backchannelLogoutUri,
                  backchannel_logout_session_required: true,
                }),
          },
        ],
        adapter: storage,
        ttl: {
          AccessToken: 600,
          AuthorizationCode: 60,
          IdToken: 600,
          Interaction: 600,
          RefreshToken: 86_400,
          Session: 86_400,
          Grant: 86_400,
        },
        jwks: { keys: [jwk] },
        cookies: { keys: cookieKeys, long: { sameSite: 'lax' }, short: { sameSite: 'lax' } },
        claims: { openid: ['sub', ...extraClaims], profile: claimScopes, email: ['email', 'email_verified'] },
        // true: scope claims only from userinfo, the ID token holds `sub` and the protocol claims.
        conformIdTokenClaims: options.claimsIn === 'userinfo',
        features: {
          devInteractions: { enabled: false },
          backchannelLogout: { enabled: true },
          rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
        },
        interactions: { url: (_ctx, interaction) => `${mountPath}/interaction/${interaction.uid}` },
        issueRefreshToken: async (_ctx, c) =>
          options.refreshTokens !== false && c.grantTypeAllowed('refresh_token'),
        async findAccount(_ctx, sub) {
          const person = people.get(sub)
          if (person === undefined || person.disabled) return undefined
          return {
            accountId: sub,
            claims: async () => ({
              sub,
              name: person.name,
              preferred_username: person.username,
              email: person.email,
              email_verified: true,
              ...(person.roles === undefined ? {} : { roles: [...person.roles] }),
              ...(person.teams === undefined ? {} : { teams: [...person.teams] }),
              ...(person.groups === undefined ? {} : { groups: [...person.groups] }),
              ...person.extraClaims,
            }),
          }
        },
        renderError: async (ctx, out) => {
          ctx.type = 'html'
          ctx.body = document(
            'Sign-in error',
            `<p>${escapeHtml(String(out.error_description ?? out.error))}</p><p class="code">${escapeHtml(String(out.error))}</p>`,
          )
        },
      }
      const p = new Provider(issuer, configuration)
      // Behind a proxy (the tests' nginx), trust its X-Forwarded-Proto and Host.
      p.proxy = true
      p.on('grant.success', (ctx: KoaContextWithOIDC) => {
        const type = String((ctx.oidc.params as { grant_type?: string } | undefined)?.grant_type ?? '')
        grants.set(type, (grants.get(type) ?? 0) + 1)
      })
      provider = p
    },
    updatePerson(sub, changes) {
      const person = people.get(sub)
      if (person === undefined) throw new Error(`no demo person ${sub}`)
      people.set(sub, { ...person, ...changes })
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }

  function page(res: ServerResponse, status: number, title: string, body: string): void {
    res.writeHead(status, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': IDP_CSP,
      'cache-control': 'no-store',
    })
    res.end(document(title, body))
  }

  function document(title: string, body: string): string {
    return htmlDocument({
      title: `${title} · Demo identity provider`,
      head: [
        `<link rel="icon" href="${mountPath}/favicon.svg" type="image/svg+xml">`,
        `<link rel="stylesheet" href="${mountPath}/demo-idp.css">`,
      ],
      body: `<main>
<p class="brand">Demo identity provider</p>
<h1>${escapeHtml(title)}</h1>
${body}
</main>`,
    })
  }

  function loginForm(action: string, error?: string): string {
    const names = [...people.values()].map((x) => `<code>${escapeHtml(x.username)}</code>`).join(' or ')
    return `${error === undefined ? '' : `<p class="error" role="alert">${escapeHtml(error)}</p>`}
<form method="post" action="${escapeHtml(action)}/login">
<label for="username">Username</label>
<input id="username" name="username" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p class="hint">Demo people: ${names}. The password was printed where the demo started.</p>`
  }

  function consentForm(action: string, clientId: string): string {
    return `<p><strong>${escapeHtml(clientId)}</strong> asks to know who you are: your name, email, roles and teams.</p>
<form method="post" action="${escapeHtml(action)}/consent"><button type="submit">Allow</button></form>
<form method="post" action="${escapeHtml(action)}/deny"><button type="submit" class="secondary">Deny</button></form>`
  }

  async function logoutSource(ctx: KoaContextWithOIDC, form: string): Promise<void> {
    ctx.type = 'html'
    ctx.set('content-security-policy', IDP_CSP)
    // The person asked the relying party to sign out; this page is the IdP's own step (oidc-provider always
    // asks, and a form cannot post itself without script). It says what each answer does.
    ctx.body = document(
      'Sign out',
      `${form}<p>You are signed out of the support console. Sign out of the demo identity provider too?</p>
<p class="hint">Either way, the console asks for your password the next time you sign in from this browser.</p>
<button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm" class="secondary">No, stay signed in</button>`,
    )
  }

  async function postLogoutSuccessSource(ctx: KoaContextWithOIDC): Promise<void> {
    ctx.type = 'html'
    ctx.body = document('Signed out', '<p>You are signed out of the demo identity provider.</p>')
  }
}

/** No script; forms may post anywhere (the sign-in redirects to the relying party after a POST). */
const IDP_CSP =
  "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"

const STYLESHEET = `:root{color-scheme:light dark;--fg:#1b1f24;--bg:#eef1f5;--card:#fff;--accent:#6b3fd4;--muted:#57606a}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--card:#161b22;--accent:#b69cff;--muted:#9da7b3}}
body{margin:0;font:16px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:24rem;margin:2rem auto;padding:1.5rem;background:var(--card);border-radius:8px}
.brand{color:var(--accent);font-weight:600;margin:0}h1{margin:.25rem 0 1rem}
label{display:block;margin-top:.75rem}input{width:100%;box-sizing:border-box;padding:.5rem;font:inherit}
button{margin-top:1rem;padding:.6rem 1rem;font:inherit;font-weight:600;border:1px solid var(--accent);border-radius:6px;background:var(--accent);color:var(--card);cursor:pointer}
button.secondary{background:transparent;color:var(--accent)}.error{color:#b3261e;font-weight:600}.hint,.code{color:var(--muted);font-size:.875rem}`

/** The IdP's icon: a person, in its own colour (it stands for a team's identity provider, not the gateway). */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><title>Demo identity provider</title><rect width="32" height="32" rx="6" fill="#6b3fd4"/><circle cx="16" cy="12" r="5" fill="#fff"/><path d="M7 26.5c0-5 4-8 9-8s9 3 9 8z" fill="#fff"/></svg>`

/**
 * The IdP's storage (sessions, grants, codes, tokens): this process's memory, one map per IdP, entries
 * forgotten when they expire. A demo has no other replica and loses its sign-ins on restart on purpose.
 */
function memoryStorage(): AdapterFactory {
  const entries = new Map<string, { payload: AdapterPayload; expiresAt: number }>()
  const lookups = new Map<string, string>()
  const byGrant = new Map<string, Set<string>>()
  let writes = 0
  const live = (key: string): AdapterPayload | undefined => {
    const entry = entries.get(key)
    if (entry === undefined || entry.expiresAt > Date.now()) return entry?.payload
    entries.delete(key)
    return undefined
  }
  const sweep = () => {
    const now = Date.now()
    for (const [key, e] of entries) if (e.expiresAt <= now) entries.delete(key)
  }
  return (model: string): Adapter => ({
    async upsert(id, payload, expiresIn) {
      if (++writes % 1000 === 0) sweep()
      const key = `${model}:${id}`
      entries.set(key, { payload, expiresAt: Date.now() + expiresIn * 1000 })
      if (model === 'Session' && payload.uid !== undefined) lookups.set(`uid:${payload.uid}`, id)
      if (payload.userCode !== undefined) lookups.set(`userCode:${payload.userCode}`, id)
      if (payload.grantId !== undefined) {
        const keys = byGrant.get(payload.grantId) ?? new Set<string>()
        keys.add(key)
        byGrant.set(payload.grantId, keys)
      }
    },
    find: async (id) => live(`${model}:${id}`),
    async findByUid(uid) {
      const id = lookups.get(`uid:${uid}`)
      return id === undefined ? undefined : live(`${model}:${id}`)
    },
    async findByUserCode(userCode) {
      const id = lookups.get(`userCode:${userCode}`)
      return id === undefined ? undefined : live(`${model}:${id}`)
    },
    async consume(id) {
      const payload = live(`${model}:${id}`)
      if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000)
    },
    async destroy(id) {
      entries.delete(`${model}:${id}`)
    },
    async revokeByGrantId(grantId) {
      for (const key of byGrant.get(grantId) ?? []) entries.delete(key)
      byGrant.delete(grantId)
    },
  })
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => {
      body += chunk
      if (body.length > 16 * 1024) req.destroy(new Error('form too large'))
    })
    req.on('end', () => resolve(body))
    req.on('error', reject)
  })
}
