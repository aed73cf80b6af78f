import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { Redis } from 'ioredis'
import { DOCUMENT_ENV, documentApp } from '../../scripts/docs-openapi.ts'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { HIDDEN_ROUTES } from '../../src/openapi/plugin.ts'
import { PROBE_PATHS } from '../../src/routes/health.ts'
import { SESSION_PREFIX } from '../../src/upstream/routes.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { freePort, REDIS_TEST_URL } from '../cluster/redis-harness.ts'
import { startFakeKasm } from '../fixtures/kasm-api.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { kasmEnv } from '../kasm/helpers.ts'
import { seedWeek } from '../report/seed.ts'
import { type Answer, Conformance, EXERCISED_IN, UNREACHABLE } from './conformance.ts'

/**
 * Every gateway route answers what its schema declares (conformance.ts says how it is checked), on real
 * gateways with a simulated runtime, a fake Kasm and Redis: the happy path and the main refusals of each.
 * The routes of the sign-in and of the Slack app are exercised by openapi-conformance-signin.test.ts and
 * openapi-conformance-chat.test.ts; the first test here checks that the three files, with the few answers no
 * test can reach, name every declared answer of every route.
 */

const RUNTIME_TOKEN = 'tok-conformance-secret'
const BASE = '/gw/'
const conformance = new Conformance()

/** The routes of the document's app (every feature on), by `METHOD url`, HEAD twins left out. */
async function documentRoutes(): Promise<Map<string, RouteOptions>> {
  const routes = new Map<string, RouteOptions>()
  const app = await documentApp({
    onRoute: (route) => {
      for (const method of [route.method].flat())
        if (method !== 'HEAD') routes.set(`${method} ${route.url}`, route)
    },
  })
  await app.close()
  return routes
}

test('the conformance tests, with the answers no test reaches, name every declared answer of every route', async () => {
  assert.equal(DOCUMENT_ENV.GATEWAY_BASE_PATH, undefined, 'the routes are compared without a base path')
  const routes = await documentRoutes()
  const declared = new Set<Answer>()
  const withoutSchema: string[] = []
  for (const [route, options] of routes) {
    const response = options.schema?.response as Record<string, unknown> | undefined
    if (response === undefined) {
      // Forwarded to the runtime (described from the protocol) or a static asset: nothing of ours to check.
      if (!options.url.startsWith(SESSION_PREFIX.split(':')[0] as string) && !HIDDEN_ROUTES.has(options.url))
        withoutSchema.push(route)
      continue
    }
    for (const status of Object.keys(response))
      if (/^\d{3}$/.test(status)) declared.add(`${route} ${status}`)
      else assert.match(status, /^[45]xx$/, `${route}: declare statuses, or a range of errors`)
  }
  assert.deepEqual(withoutSchema, [], 'gateway routes without a response schema')

  const named = [...Object.values(EXERCISED_IN).flat(), ...UNREACHABLE.keys()]
  assert.deepEqual(
    named.filter((answer, i) => named.indexOf(answer) !== i),
    [],
    'named twice',
  )
  assert.deepEqual(
    [...declared].filter((answer) => !named.includes(answer)),
    [],
    'declared answers no conformance test exercises: add a call to one, or to UNREACHABLE saying why',
  )
  // A named refusal must be a route's, of a status its ranges declare.
  const stale = named.filter((answer) => {
    const [method, url, status] = answer.split(' ') as [string, string, string]
    const response = routes.get(`${method} ${url}`)?.schema?.response as Record<string, unknown> | undefined
    return response === undefined || (response[status] ?? response[`${status[0]}xx`]) === undefined
  })
  assert.deepEqual(stale, [], 'named, but no route declares it')
  // Every route is exercised with an answer that is no error (its happy path), or said unreachable.
  const happy = new Set(
    named.filter((answer) => /^[23]/.test(answer.split(' ')[2] ?? '')).map((a) => a.replace(/ \d+$/, '')),
  )
  assert.deepEqual(
    [...routes.keys()].filter(
      (route) => !happy.has(route) && routes.get(route)?.schema?.response !== undefined,
    ),
    [],
    'routes whose happy path no test exercises',
  )
})

/** A gateway (port 0) under {@link BASE} whose every route is checked by {@link conformance}. */
async function start(t: TestContext, env: Record<string, string> = {}) {
  const config = loadConfig(testEnv({ GATEWAY_BASE_PATH: BASE, ...env }))
  const app: FastifyInstance = await buildApp(config, { onRoute: conformance.hook(config.routePrefix) })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const origin = `http://127.0.0.1:${address.port}`
  /** `path` under the base path (`/admin/sessions`); `headers` added to the token's. */
  const call = async (
    method: string,
    path: string,
    options: { token?: string | undefined; body?: unknown; headers?: Record<string, string> } = {},
  ) => {
    const { token, body } = options
    // The probes and the sessions' routes (Kasm's paths) are at the root whatever the base path.
    const under = PROBE_PATHS.has(path) || path.startsWith('/desktop/') ? '' : config.routePrefix
    const response = await fetch(`${origin}${under}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...options.headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      redirect: 'manual',
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, text }
  }
  return { app, origin, call }
}

test('every gateway route answers what its schema declares (happy paths and refusals)', async (t) => {
  const runtime = await startSimulatedRuntime({ messagingToken: RUNTIME_TOKEN })
  t.after(() => runtime.close())
  const { app, origin, call } = await start(t)
  const admin = await bearer({ sub: 'root', name: 'Root Admin', roles: ['admin'] })
  const operator = await bearer({ sub: 'olga', name: 'Olga', roles: ['operator'], teams: ['blue'] })
  const viewer = await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] })
  const statuses: Record<string, number> = {}
  const at = async (label: string, method: string, path: string, token?: string, body?: unknown) => {
    const answer = await call(method, path, { token, body })
    statuses[label] = answer.status
    return answer
  }

  // Health.
  await at('healthz', 'GET', '/healthz')
  await at('readyz', 'GET', '/readyz')
  await at('metrics', 'GET', '/metrics')
  await at('favicon', 'GET', '/favicon.ico')
  // Admin: register, list, read, replace, refusals.
  const registration = { upstream: runtime.url, team: 'blue', messagingToken: RUNTIME_TOKEN }
  await at('put 201', 'PUT', '/admin/sessions/k1', admin, registration)
  await at('put 200', 'PUT', '/admin/sessions/k1', admin, registration)
  await at('put 400', 'PUT', '/admin/sessions/k1', admin, { team: 'blue' })
  await at('put 401', 'PUT', '/admin/sessions/k1', undefined, registration)
  await at('put 403', 'PUT', '/admin/sessions/k1', operator, registration)
  await at('list', 'GET', '/admin/sessions', admin)
  await at('get', 'GET', '/admin/sessions/k1', admin)
  await at('get 404', 'GET', '/admin/sessions/nope', admin)
  await at('presence', 'GET', '/admin/sessions/k1/presence', admin)
  await at('unreadable', 'GET', '/admin/unreadable-sessions', admin)
  await at('drop unreadable 404', 'DELETE', '/admin/unreadable-sessions/nope', admin)
  await at('launch 501', 'POST', '/admin/sessions', admin, { image: 'chrome', team: 'blue' })
  await at('notifications', 'GET', '/admin/notifications?limit=5', admin)
  // The overview's event stream: its socket is taken over, so its beginning is checked as the client sees it.
  const abort = new AbortController()
  const overview = await fetch(`${origin}/gw/api/overview`, {
    headers: { authorization: `Bearer ${viewer}` },
    signal: abort.signal,
  })
  conformance.stream('GET', '/api/overview', overview.status, overview.headers.get('content-type'))
  abort.abort()
  await overview.body?.cancel().catch(() => {})
  // A message through the gateway: an audit record, the run's activity.
  const { run } = JSON.parse((await call('GET', '/desktop/k1/mcp/inbox', { token: operator })).text) as {
    run: string
  }
  await at('message', 'POST', '/desktop/k1/mcp/messages', operator, { run, key: 'k-1', text: 'hello' })
  await at('audit', 'GET', '/admin/audit?limit=10', admin)
  await at('audit 400', 'GET', '/admin/audit?limit=0', admin)
  await at('activity', 'GET', `/api/sessions/k1/activity?run=${run}`, viewer)
  await at('activity 400', 'GET', '/api/sessions/k1/activity', viewer)
  // "I'm on it" on a real question, who answered it.
  const { request_id } = runtime.ask({
    title: 'Pick',
    fields: [{ id: 'n', type: 'integer', required: true }],
  })
  const question = `/api/sessions/k1/requests/${request_id}`
  await at('answer 404', 'GET', `${question}/answer?run=${run}`, viewer)
  await at('claim', 'PUT', `${question}/claim?run=${run}`, operator)
  await at('claim 403', 'PUT', `${question}/claim?run=${run}`, viewer)
  await at('release', 'DELETE', `${question}/claim?run=${run}`, operator)
  await at('release 409', 'DELETE', `${question}/claim?run=${run}`, operator)
  const reply = { run, key: 'k-2', reply_to: request_id, revision: 1, values: { n: 7 } }
  await at('reply', 'POST', '/desktop/k1/mcp/messages', operator, reply)
  await at('answer', 'GET', `${question}/answer?run=${run}`, viewer)
  // The report, with a week of records.
  await seedWeek(app.teamReport.store, Date.now())
  await at('report', 'GET', '/api/report?window=7d', admin)
  await at('report 400', 'GET', '/api/report?window=1y', admin)
  await at('report csv', 'GET', '/api/report.csv?window=24h', admin)
  // Who you are, a cookie session started and ended, linked accounts (no chat adapter), the document.
  await at('me', 'GET', '/auth/me', viewer)
  await at('me 401', 'GET', '/auth/me')
  const session = await at('session', 'POST', '/auth/session', viewer)
  const cookie = session.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ')
  const end = await call('DELETE', '/auth/session', { headers: { cookie, 'sec-fetch-site': 'same-origin' } })
  statuses['end session'] = end.status
  await at('chat links', 'GET', '/api/chat-links', viewer)
  await at('openapi', 'GET', '/api/openapi.json', viewer)
  await at('openapi 401', 'GET', '/api/openapi.json')
  // The console's pages, their revalidation (ETag) and redirects.
  const console = await at('console', 'GET', '/', viewer)
  const again = { token: viewer, headers: { 'if-none-match': console.headers.get('etag') ?? '' } }
  statuses['console 304'] = (await call('GET', '/', again)).status
  await at('console session', 'GET', '/sessions/k1', viewer)
  statuses['console session 304'] = (await call('GET', '/sessions/k1', again)).status
  const report = await at('report page', 'GET', '/report', operator)
  const reportAgain = { token: operator, headers: { 'if-none-match': report.headers.get('etag') ?? '' } }
  statuses['report page 304'] = (await call('GET', '/report', reportAgain)).status
  await at('report page 403', 'GET', '/report', viewer)
  statuses['base without slash'] = (await fetch(`${origin}/gw`, { redirect: 'manual' })).status
  await at('sessions', 'GET', '/sessions')
  await at('sessions/', 'GET', '/sessions/')
  await at('login 404', 'GET', '/auth/login')
  await at('logged out', 'GET', '/auth/logged-out')
  // Removing the session.
  await at('delete', 'DELETE', '/admin/sessions/k1', admin)
  await at('delete 404', 'DELETE', '/admin/sessions/k1', admin)
  // Draining (a shutdown has begun): not ready, and no new stream.
  app.readiness.drain()
  await at('readyz draining', 'GET', '/readyz')
  await at('overview draining', 'GET', '/api/overview', viewer)

  assert.deepEqual(statuses, {
    healthz: 200,
    readyz: 200,
    metrics: 200,
    favicon: 200,
    'put 201': 201,
    'put 200': 200,
    'put 400': 400,
    'put 401': 401,
    'put 403': 403,
    list: 200,
    get: 200,
    'get 404': 404,
    presence: 200,
    unreadable: 200,
    'drop unreadable 404': 404,
    'launch 501': 501,
    notifications: 200,
    message: 202,
    audit: 200,
    'audit 400': 400,
    activity: 200,
    'activity 400': 400,
    'answer 404': 404,
    claim: 200,
    'claim 403': 403,
    release: 204,
    'release 409': 409,
    reply: 202,
    answer: 200,
    report: 200,
    'report 400': 400,
    'report csv': 200,
    me: 200,
    'me 401': 401,
    session: 201,
    'end session': 204,
    'chat links': 200,
    openapi: 200,
    'openapi 401': 401,
    console: 200,
    'console 304': 304,
    'console session': 200,
    'console session 304': 304,
    'report page': 200,
    'report page 304': 304,
    'report page 403': 403,
    'base without slash': 308,
    sessions: 308,
    'sessions/': 308,
    'login 404': 404,
    'logged out': 200,
    delete: 204,
    'delete 404': 404,
    'readyz draining': 503,
    'overview draining': 503,
  })
  assert.equal(overview.status, 200)
  assert.deepEqual(conformance.violations, [])
  // The hook saw the JSON answers (it cannot pass by not running).
  for (const answer of [
    'GET /admin/sessions 200',
    'GET /admin/audit 200',
    'GET /api/report 200',
    'GET /api/sessions/:kasmId/activity 200',
    'PUT /admin/sessions/:kasmId 400',
    'GET /auth/me 200',
    'GET /readyz 503',
  ])
    assert.ok(conformance.json.has(answer), answer)
})

test('a session launched in Kasm (a fake Kasm API) answers what the launch declares', async (t) => {
  const runtimePort = await freePort()
  const kasm = await startFakeKasm({ auth: 'body', runtimePort })
  t.after(() => kasm.close())
  const { call } = await start(t, kasmEnv(kasm, runtimePort, 'body'))
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const body = { image: 'Chrome', team: 'blue' }
  const launched = await call('POST', '/admin/sessions', { token: admin, body })
  assert.equal(launched.status, 201, launched.text)
  const { kasmId } = JSON.parse(launched.text) as { kasmId: string }
  assert.equal((await call('DELETE', `/admin/sessions/${kasmId}`, { token: admin })).status, 204)
  assert.deepEqual(conformance.violations, [])
})

test('a stored record no key opens is listed and deleted as declared', async (t) => {
  const env = sharedRedisEnv(t)
  const { app, call } = await start(t, env)
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  await redis.hset(`${env.GATEWAY_REDIS_PREFIX}sessions`, 'x-1', '{"not": "a session"')
  await redis.publish(`${env.GATEWAY_REDIS_PREFIX}sessions:changed`, 'someone-else x-1')
  await waitFor('the record reported', async () => (await app.sessions.unreadable()).length === 1)
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  assert.equal((await call('GET', '/readyz')).status, 503)
  const listed = await call('GET', '/admin/unreadable-sessions', { token: admin })
  assert.deepEqual(JSON.parse(listed.text), {
    sessions: [{ kasmId: 'x-1', team: null, reason: 'malformed' }],
  })
  assert.equal((await call('DELETE', '/admin/unreadable-sessions/x-1', { token: admin })).status, 204)
  assert.deepEqual(conformance.violations, [])
})

test("this file's gateways gave every answer it is responsible for", () => {
  conformance.assertConformant('core')
})
