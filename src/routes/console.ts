import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type ConsoleAssets, loadConsoleAssets, negotiate } from '../console/assets.ts'
import { renderShell } from '../console/shell.ts'
import { RouteNotFound } from '../errors.ts'

/**
 * A strict policy: the console runs only its own bundled script and style, talks only to this origin, shows
 * images only from it (screenshots through the gateway), and cannot be framed. No inline script or style;
 * DOM sinks that parse HTML are disabled altogether (Trusted Types with no policy).
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; require-trusted-types-for 'script'; " +
  "trusted-types 'none'"

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
 * `<base>sessions/<kasm_id>` (a session, deep-linkable), and its bundled assets at `<base>assets/<file>`,
 * hashed, immutable, brotli or gzip as the browser accepts, with ETags. The page signs in with the cookie
 * and reads everything through the gateway's own routes; it never sees a messaging token.
 */
export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  const assets: ConsoleAssets = await loadConsoleAssets()
  const shell = renderShell(app.config.basePath, assets.manifest)

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .header('etag', shell.etag)
    if (matches(request, shell.etag)) return reply.code(304).send()
    return reply.send(shell.html)
  }

  app.get('/', async (request, reply) => {
    // `<base>` without its slash would resolve the page's relative URLs one level too high.
    if (!request.url.split('?')[0]?.endsWith('/')) return reply.redirect(app.config.basePath, 308)
    return page(request, reply)
  })
  app.get<{ Params: { kasmId: string } }>('/sessions/:kasmId', page)
  // The list of sessions is the overview.
  app.get('/sessions', async (_request, reply) => reply.redirect(app.config.basePath, 308))
  app.get('/sessions/', async (_request, reply) => reply.redirect(app.config.basePath, 308))

  app.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
    const asset = assets.files.get(request.params.file)
    if (asset === undefined) throw new RouteNotFound()
    const chosen = negotiate(asset, request.headers['accept-encoding'])
    reply
      .header('content-type', asset.type)
      .header('cache-control', IMMUTABLE)
      .header('x-content-type-options', 'nosniff')
      .header('vary', 'accept-encoding')
      .header('etag', chosen.etag)
    if (chosen.encoding !== null) reply.header('content-encoding', chosen.encoding)
    if (matches(request, chosen.etag)) return reply.code(304).send()
    return reply.send(chosen.body)
  })
}
