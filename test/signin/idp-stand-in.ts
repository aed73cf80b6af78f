import { createServer } from 'node:http'
import { request } from 'undici'
import type { Cleanup } from './harness.ts'

/** What a stand-in changes in the real IdP's answers; each rewrite gets the parsed JSON and returns it. */
export interface IdpRewrites {
  /** The discovery document (`/.well-known/openid-configuration`). */
  readonly discovery?: (metadata: Record<string, unknown>) => Record<string, unknown>
  /** A successful token response (`/token`, status 200): e.g. its `id_token` replaced. */
  readonly token?: (
    body: Record<string, unknown>,
  ) => Record<string, unknown> | Promise<Record<string, unknown>>
}

/** A running stand-in: how many answers it rewrote. */
export interface IdpStandIn {
  readonly issuer: string
  readonly rewritten: { discovery: number; token: number }
}

/**
 * An IdP that misbehaves as a real one might: an HTTP proxy on `port` (the issuer the gateway is configured
 * with, and the real IdP too: start it with `{ issuer: \`http://127.0.0.1:${port}\` }`) to the real OpenID provider at `target`, passing everything through but the answers `rewrites`
 * changes. The IdP's own logic (login, consent, codes, keys) stays real.
 */
export async function startIdpStandIn(
  t: Cleanup,
  port: number,
  target: string,
  rewrites: IdpRewrites,
): Promise<IdpStandIn> {
  const rewritten = { discovery: 0, token: 0 }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const upstream = await request(`${target}${req.url}`, {
        method: req.method as 'GET',
        headers: req.headers,
        ...(chunks.length === 0 ? {} : { body: Buffer.concat(chunks) }),
      })
      let body = Buffer.from(await upstream.body.arrayBuffer())
      const path = (req.url ?? '').split('?', 1)[0]
      const rewrite =
        path === '/.well-known/openid-configuration'
          ? rewrites.discovery && { kind: 'discovery' as const, fn: rewrites.discovery }
          : path === '/token' && upstream.statusCode === 200
            ? rewrites.token && { kind: 'token' as const, fn: rewrites.token }
            : undefined
      if (rewrite) {
        const json = JSON.parse(body.toString()) as Record<string, unknown>
        body = Buffer.from(JSON.stringify(await rewrite.fn(json)))
        rewritten[rewrite.kind]++
      }
      const headers = { ...upstream.headers }
      delete headers['content-length']
      delete headers['transfer-encoding']
      res.writeHead(upstream.statusCode, { ...headers, 'content-length': String(body.length) })
      res.end(body)
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return { issuer: `http://127.0.0.1:${port}`, rewritten }
}

/** The claims of a compact JWT, unverified (the stand-in re-signs what the real IdP signed). */
export function jwtClaims(jwt: string): Record<string, unknown> {
  const payload = jwt.split('.')[1] ?? ''
  return JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>
}
