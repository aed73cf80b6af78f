import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { type Dispatcher, request } from 'undici'
import { buildApp } from '../../src/app.ts'
import type { Operator } from '../../src/auth/operator.ts'
import { loadConfig } from '../../src/config.ts'
import { testEnv } from '../helpers/jwt.ts'

/** Where to register cleanup: a TestContext, or `{ after }` from node:test for a file-wide gateway. */
export interface Cleanup {
  after(fn: () => unknown): void
}

/** A real gateway with test-only routes behind each access level, listening on 127.0.0.1 port 0. */
export interface AuthGateway {
  app: FastifyInstance
  url: string
  /** How many times each test route's handler ran (a refused request must never reach it). */
  reached: Map<string, number>
  /** The operator of the last request that reached a test route. */
  lastOperator(): Operator | null
}

/**
 * Builds the gateway with `buildApp`, adds `/t/read` (GET), `/t/write` (POST) and `/t/admin` (POST), each
 * behind `app.requireAccess`, then listens. Closed by `t.after`.
 */
export async function startAuthGateway(
  t: Cleanup,
  overrides: Record<string, string> = {},
  logger?: FastifyServerOptions['logger'],
): Promise<AuthGateway> {
  const app = await buildApp(loadConfig(testEnv(overrides)), logger === undefined ? {} : { logger })
  const reached = new Map<string, number>()
  let last: Operator | null = null
  const handler = (name: string) => async (req: { operator: Operator | null }) => {
    reached.set(name, (reached.get(name) ?? 0) + 1)
    last = req.operator
    return { sub: req.operator?.sub, via: req.operator?.via }
  }
  app.get('/t/read', { onRequest: app.requireAccess('read') }, handler('read'))
  app.post('/t/write', { onRequest: app.requireAccess('write') }, handler('write'))
  app.post('/t/admin', { onRequest: app.requireAccess('admin') }, handler('admin'))
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { app, url: `http://127.0.0.1:${address.port}`, reached, lastOperator: () => last }
}

/** A response read in full. */
export interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Record<string, unknown>
  /** `Set-Cookie` lines. */
  setCookies: string[]
}

/** Sends a request (undici, so any header can be set) and reads the JSON body if there is one. */
export async function call(
  url: string,
  options: { method?: Dispatcher.HttpMethod; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const res = await request(url, {
    method: options.method ?? 'GET',
    headers: options.headers ?? {},
    ...(options.body === undefined ? {} : { body: options.body }),
  })
  const text = await res.body.text()
  const raw = res.headers['set-cookie']
  return {
    status: res.statusCode,
    headers: res.headers,
    body: text.length > 0 && text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : {},
    setCookies: raw === undefined ? [] : Array.isArray(raw) ? raw : [raw],
  }
}

/** The `name=value` pair of the Set-Cookie line for `name`, ready for a `Cookie` header. */
export function cookiePair(answer: Answer, name = 'krg_session'): string {
  const line = answer.setCookies.find((l) => l.startsWith(`${name}=`))
  if (!line) throw new Error(`no ${name} cookie in ${JSON.stringify(answer.setCookies)}`)
  return line.split(';')[0]!
}

/** The value of one `krg_auth_failures_total` series. */
export async function failures(app: FastifyInstance, reason: string): Promise<number> {
  const metric = await app.metrics.authFailures.get()
  return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0
}

/** Authorization header for a bearer token. */
export function auth(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` }
}
