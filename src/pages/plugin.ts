import { readFile } from 'node:fs/promises'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { ErrorAnswer, ErrorBody } from '../errors.ts'
import { CONSOLE } from '../openapi/routes/console.ts'
import { pageForError } from './catalogue.ts'
import { isBrowserNavigation } from './navigation.ts'
import { PAGE_CSP, type Page, renderPage } from './page.ts'

/** `app.pages`: how any route shows a person a page. */
export interface Pages {
  /** Renders `page` and sends it with its status, the strict policy and `no-store`. */
  send(reply: FastifyReply, page: Page): FastifyReply
  /**
   * Answers an error: a human page for a browser navigation ({@link isBrowserNavigation}), the JSON body
   * `{error, message, requestId}` for everything else. The app's error and not-found handlers use it.
   */
  sendError(request: FastifyRequest, reply: FastifyReply, status: number, body: ErrorBody): FastifyReply
}

declare module 'fastify' {
  interface FastifyInstance {
    pages: Pages
  }
}

/** The pages' stylesheet: the gateway's theme (shared with the console), then the pages' own rules. */
const stylesheets = [new URL('./theme.css', import.meta.url), new URL('./pages.css', import.meta.url)]
/** The console's icon as an ICO (rendered from its SVG by `npm run favicon`). */
const favicon = new URL('./favicon.ico', import.meta.url)

/**
 * The gateway's human pages (sign-in, signed out, errors for navigations), their stylesheet at
 * `<base>pages/pages.css` and the gateway's icon at `<base>favicon.ico` (where a browser looks for one when a
 * document names none, a JSON answer included). Register with the base path's prefix.
 */
export const pagesPlugin = fp(
  async (app, options: { prefix?: string }) => {
    const basePath = app.config.basePath
    const css = Buffer.concat(await Promise.all(stylesheets.map((file) => readFile(file))))
    const icon = await readFile(favicon)
    const pages: Pages = {
      send(reply, page) {
        return reply
          .code(page.status)
          .header('content-type', 'text/html; charset=utf-8')
          .header('content-security-policy', PAGE_CSP)
          .header('x-content-type-options', 'nosniff')
          .header('referrer-policy', 'no-referrer')
          .header('cache-control', 'no-store')
          .send(renderPage(page, basePath))
      },
      sendError(request, reply, status, body) {
        if (!isBrowserNavigation(request)) {
          const answer: ErrorAnswer = { ...body, requestId: request.id }
          return reply.code(status).send(answer)
        }
        return pages.send(reply, { ...pageForError(status, body, returnPath(request, basePath)), status })
      },
    }
    app.decorate('pages', pages)
    // fastify-plugin shares the decorator app-wide; the route goes under the base path like the console.
    app.get(`${options.prefix ?? ''}/pages/pages.css`, async (_request, reply) =>
      reply
        .header('content-type', 'text/css; charset=utf-8')
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'public, max-age=3600')
        .send(css),
    )
    app.get(`${options.prefix ?? ''}/favicon.ico`, { schema: CONSOLE.favicon }, async (_request, reply) =>
      reply
        .header('content-type', 'image/x-icon')
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'public, max-age=86400')
        .send(icon),
    )
  },
  { name: 'pages' },
)

/** Where a failed sign-in was going (its login attempt's `return_to`), by the callback request. */
const signInReturns = new WeakMap<FastifyRequest, string>()

/** Says where the sign-in `request` (a callback) was going, so its failure page offers to go there again. */
export function returnAfterSignIn(request: FastifyRequest, path: string | undefined): void {
  if (path !== undefined) signInReturns.set(request, path)
}

/**
 * The path (and query) a navigation asked for, to come back to after signing in; GETs only. A sign-in
 * route's own URL (a callback's code, a one-time ticket) is no place to come back to: there, where its
 * attempt was going, when known.
 */
function returnPath(request: FastifyRequest, basePath: string): string | undefined {
  const signIn = signInReturns.get(request)
  if (signIn !== undefined) return signIn
  if (request.method !== 'GET' || request.url.startsWith(`${basePath}auth/`)) return undefined
  return request.url
}
