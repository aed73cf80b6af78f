import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type Access, allows } from '../auth/operator.ts'
import type { Config } from '../config.ts'
import { type ConsoleAssets, loadConsoleAssets, negotiate } from '../console/assets.ts'
import { renderShell, type Shell } from '../console/shell.ts'
import { Forbidden, NoRole, RouteNotFound } from '../errors.ts'
import { CONSOLE } from '../openapi/routes/console.ts'
import { signInLink } from '../pages/catalogue.ts'
import { isBrowserNavigation } from '../pages/navigation.ts'

/**
 * A strict policy: the console runs only its own bundled script and style, talks only to this origin, shows
 * images only from it (screenshots through the gateway), and cannot be framed. No inline script or style;
 * DOM sinks that parse HTML are disabled altogether (Trusted Types with no policy). Its one form, Sign out,
 * posts here and is redirected to the identity provider's end-session endpoint (RP-initiated logout), and
 * browsers hold that redirect to `form-action` too: `idpOrigin` is that endpoint's origin, or null.
 */
export function consolePolicy(idpOrigin: string | null): string {
  const formAction = idpOrigin === null ? "'self'" : `'self' ${idpOrigin}`
  return (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
    `frame-ancestors 'none'; base-uri 'none'; form-action ${formAction}; require-trusted-types-for 'script'; ` +
    "trusted-types 'none'"
  )
}

/**
 * Where the Kasm viewer of a session is (a handoff's "take over" link): GATEWAY_KASM_PUBLIC_URL, else the
 * Developer API's origin, as for the launcher's viewer links; null (no link) when neither is set.
 */
export function kasmOrigin(config: Config): string | null {
  const { env } = config
  if (env.GATEWAY_KASM_PUBLIC_URL !== undefined) return env.GATEWAY_KASM_PUBLIC_URL
  return env.GATEWAY_KASM_API_URL === undefined ? null : new URL(env.GATEWAY_KASM_API_URL).origin
}

/** A year: the file name changes with its content, so a cached copy is never stale. */
const IMMUTABLE = 'public, max-age=31536000, immutable'

function matches(request: FastifyRequest, etag: string): boolean {
  const header = request.headers['if-none-match']
  return (
    typeof header === 'string' && header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
  )
}

/**
 * The support console under the base path: the page at `<base>` (the overview) and at
 * `<base>sessions/<kasm_id>` (a session, deep-linkable), the team report's page at `<base>report` (operators and
 * admins: a viewer gets the 403 page), and their bundled assets at `<base>assets/<file>`,
 * hashed, immutable, brotli or gzip as the browser accepts, with ETags. The page signs in with the cookie
 * and reads everything through the gateway's own routes; it never sees a messaging token.
 *
 * The page is only for someone signed in with a role. A person who is not (no cookie, or one that expired or
 * was revoked) is sent to sign in and back (`auth/login?return_to=`), or shown the sign-in page when no
 * identity provider is configured; someone without a role gets the no-role page; anything else (the cookie
 * store down) the error's page. The running page answers a 401 by loading itself again, so it always ends
 * where a fresh navigation would.
 */
export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  const assets: ConsoleAssets = await loadConsoleAssets()
  const shell = renderShell(app.config.basePath, assets.manifest, { kasmOrigin: kasmOrigin(app.config) })
  const reportShell = renderShell(app.config.basePath, assets.manifest, { page: 'report' })

  const signIn = app.auth.signIn

  /** True when the request may have the page; otherwise the answer is sent (a redirect) or thrown (a page). */
  const admit = async (request: FastifyRequest, reply: FastifyReply, access: Access): Promise<boolean> => {
    try {
      const operator = await app.auth.authenticate(request)
      if (!allows(operator, 'read'))
        throw new NoRole(operator.name === undefined ? operator.sub : `${operator.name} (${operator.sub})`)
      // The report is for the people who answer (operators, admins): a viewer gets the page saying so.
      if (!allows(operator, access)) throw new Forbidden('the report is for operators and admins')
      return true
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode
      if (status !== 401 || signIn === null || !isBrowserNavigation(request)) throw err
      reply
        .header('cache-control', 'no-store')
        .redirect(`${app.config.basePath}${signInLink(request.url)}`, 303)
      return false
    }
  }

  const serve = async (request: FastifyRequest, reply: FastifyReply, which: Shell, access: Access) => {
    if (!(await admit(request, reply, access))) return reply
    reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', consolePolicy(signIn?.logoutOrigin() ?? null))
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      // Per person (it is only sent to someone signed in), and checked again on every load.
      .header('cache-control', 'private, no-cache')
      .header('etag', which.etag)
    if (matches(request, which.etag)) return reply.code(304).send()
    return reply.send(which.html)
  }
  const page = (request: FastifyRequest, reply: FastifyReply) => serve(request, reply, shell, 'read')

  app.get('/', { schema: CONSOLE.page }, async (request, reply) => {
    // `<base>` without its slash would resolve the page's relative URLs one level too high.
    if (!request.url.split('?')[0]?.endsWith('/')) return reply.redirect(app.config.basePath, 308)
    return page(request, reply)
  })
  app.get<{ Params: { kasmId: string } }>('/sessions/:kasmId', { schema: CONSOLE.session }, page)
  app.get('/report', { schema: CONSOLE.reportPage }, (request, reply) =>
    serve(request, reply, reportShell, 'write'),
  )
  // The list of sessions is the overview.
  app.get('/sessions', { schema: CONSOLE.sessions }, async (_request, reply) =>
    reply.redirect(app.config.basePath, 308),
  )
  app.get('/sessions/', { schema: CONSOLE.sessions }, async (_request, reply) =>
    reply.redirect(app.config.basePath, 308),
  )

  app.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
    const asset = assets.files.get(request.params.file)
    if (asset === undefined) throw new RouteNotFound()
    const encoding = negotiate(request.headers['accept-encoding'])
    const etag = asset.etag(encoding)
    reply
      .header('content-type', asset.type)
      .header('cache-control', IMMUTABLE)
      .header('x-content-type-options', 'nosniff')
      .header('vary', 'accept-encoding')
      .header('etag', etag)
    if (encoding !== null) reply.header('content-encoding', encoding)
    if (matches(request, etag)) return reply.code(304).send()
    return reply.send(encoding === null ? asset.identity.body : (await asset.compressed(encoding)).body)
  })
}
