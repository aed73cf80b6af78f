import { readFile } from 'node:fs/promises'
import type { FastifyInstance } from 'fastify'
import { seesTeam } from '../auth/operator.ts'

const assets = new URL('../console/', import.meta.url)

/** A strict policy: the console runs only its own script and talks only to this origin. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

const files: ReadonlyArray<[route: string, file: string, type: string]> = [
  ['/', 'index.html', 'text/html; charset=utf-8'],
  ['/console/console.js', 'console.js', 'text/javascript; charset=utf-8'],
  ['/console/console.css', 'console.css', 'text/css; charset=utf-8'],
]

/**
 * The operator console (a minimal sidebar over the v1 routes, signed in by cookie) and `GET /sessions`,
 * the sessions the caller may see. Assets are read once at boot.
 */
export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  for (const [route, file, type] of files) {
    const body = await readFile(new URL(file, assets))
    app.get(route, async (request, reply) => {
      // `<base>` without its slash would resolve the page's relative asset URLs one level too high.
      if (route === '/' && !request.url.split('?')[0]?.endsWith('/'))
        return reply.redirect(app.config.basePath, 308)
      return reply
        .header('content-type', type)
        .header('content-security-policy', CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .send(body)
    })
  }

  app.get('/sessions', { onRequest: app.requireAccess('read') }, async (request) => {
    const operator = request.operator!
    const sessions = (await app.sessions.list())
      .filter((s) => seesTeam(operator, s.team))
      .map(({ kasmId, team }) => ({ kasmId, team }))
    return { sessions }
  })
}
