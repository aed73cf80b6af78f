import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { SHARED_SCHEMAS } from '../../src/openapi/schemas.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { seedWeek } from '../report/seed.ts'

/**
 * Every gateway route answers what its schema declares. A response schema is also the answer's serialiser,
 * which silently drops what it does not declare: so a hook of this test only (added to each route through
 * buildApp's `onRoute`) checks the handler's own payload, BEFORE serialisation, against the route's declared
 * schema for the status (strict, every object closed by its declared `additionalProperties`), and that the
 * serialised answer is that payload exactly (nothing dropped, nothing coerced); and every status a route
 * answers must be declared. The routes are exercised on a real gateway with a real simulated runtime: the
 * happy path and the main refusals of each.
 */

const RUNTIME_TOKEN = 'tok-conformance-secret'

interface Checked {
  /** `GET /admin/sessions 200` for every answer checked against a JSON schema. */
  readonly json: Set<string>
  readonly violations: string[]
}

type Entry = { content?: Record<string, { schema: unknown }> } & Record<string, unknown>

/** The declared answer of `status`: its exact code, else `4xx`-like, else `default`. */
function declared(response: Record<string, Entry>, status: number): Entry | undefined {
  return response[String(status)] ?? response[`${String(status)[0]}xx`] ?? response.default
}

/** The JSON schema of an answer (its `application/json` content, or itself), without the document's keys. */
function jsonSchema(entry: Entry): unknown {
  if (entry.content !== undefined) return entry.content['application/json']?.schema
  const { description: _d, headers: _h, ...schema } = entry
  return schema
}

/** Adds the checking hooks to `route` (called by buildApp's onRoute for every route). */
function checking(ajv: Ajv, checked: Checked) {
  const validators = new Map<unknown, ValidateFunction>()
  const compile = (schema: unknown) => {
    let validate = validators.get(schema)
    if (validate === undefined) {
      validate = ajv.compile(schema as object)
      validators.set(schema, validate)
    }
    return validate
  }
  const before = new WeakMap<FastifyRequest, string>()
  return (route: RouteOptions) => {
    const response = (route.schema?.response ?? undefined) as Record<string, Entry> | undefined
    if (response === undefined) return
    const name = (request: FastifyRequest, reply: FastifyReply) =>
      `${request.method} ${route.url} ${reply.statusCode}`
    const preSerialization = (
      request: FastifyRequest,
      reply: FastifyReply,
      payload: unknown,
      done: (err: null, payload: unknown) => void,
    ) => {
      const entry = declared(response, reply.statusCode)
      const schema = entry === undefined ? undefined : jsonSchema(entry)
      if (schema === undefined)
        checked.violations.push(`${name(request, reply)}: JSON answer, no JSON schema`)
      else {
        const validate = compile(schema)
        if (!validate(payload))
          checked.violations.push(`${name(request, reply)}: ${ajv.errorsText(validate.errors)}`)
        checked.json.add(name(request, reply))
      }
      before.set(request, JSON.stringify(payload))
      done(null, payload)
    }
    const onSend = (
      request: FastifyRequest,
      reply: FastifyReply,
      payload: unknown,
      done: (err: null, payload: unknown) => void,
    ) => {
      if (declared(response, reply.statusCode) === undefined)
        checked.violations.push(`${name(request, reply)}: status not declared`)
      const sent = before.get(request)
      if (sent !== undefined && typeof payload === 'string')
        try {
          assert.deepEqual(JSON.parse(payload), JSON.parse(sent))
        } catch {
          checked.violations.push(`${name(request, reply)}: the serialiser changed the answer`)
        }
      done(null, payload)
    }
    route.preSerialization = [route.preSerialization ?? []].flat().concat(preSerialization)
    route.onSend = [route.onSend ?? []].flat().concat(onSend)
  }
}

/** A gateway (port 0) whose every route is checked, with a simulated runtime registered as k1 (team blue). */
async function start(t: TestContext) {
  const ajv = new Ajv({ strict: true, allErrors: true })
  ;(addFormats as unknown as (ajv: Ajv) => void)(ajv)
  for (const shared of SHARED_SCHEMAS) ajv.addSchema(shared)
  const checked: Checked = { json: new Set(), violations: [] }
  const runtime = await startSimulatedRuntime({ messagingToken: RUNTIME_TOKEN })
  t.after(() => runtime.close())
  const app: FastifyInstance = await buildApp(loadConfig(testEnv()), { onRoute: checking(ajv, checked) })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const url = `http://127.0.0.1:${address.port}`
  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      redirect: 'manual',
    })
    await response.arrayBuffer()
    return response.status
  }
  return { app, url, runtime, checked, call }
}

test('every gateway route answers what its schema declares (happy paths and refusals)', async (t) => {
  const { app, url, runtime, checked, call } = await start(t)
  const admin = await bearer({ sub: 'root', name: 'Root Admin', roles: ['admin'] })
  const operator = await bearer({ sub: 'olga', name: 'Olga', roles: ['operator'], teams: ['blue'] })
  const viewer = await bearer({ sub: 'vic', roles: ['viewer'], teams: ['blue'] })
  const statuses: Record<string, number> = {}
  const at = async (label: string, method: string, path: string, token?: string, body?: unknown) => {
    statuses[label] = await call(method, path, token, body)
  }

  // Health.
  await at('healthz', 'GET', '/healthz')
  await at('readyz', 'GET', '/readyz')
  await at('metrics', 'GET', '/metrics')
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
  // A message through the gateway: an audit record, the run's activity.
  const inbox = await fetch(`${url}/desktop/k1/mcp/inbox`, {
    headers: { authorization: `Bearer ${operator}` },
  })
  const { run } = (await inbox.json()) as { run: string }
  await at('message', 'POST', '/desktop/k1/mcp/messages', operator, { run, key: 'k-1', text: 'hello' })
  await at('audit', 'GET', '/admin/audit?limit=10', admin)
  await at('audit 400', 'GET', '/admin/audit?limit=0', admin)
  await at('activity', 'GET', `/api/sessions/k1/activity?run=${run}`, viewer)
  await at('activity 400', 'GET', '/api/sessions/k1/activity', viewer)
  // "I'm on it", who answered.
  const question = `/api/sessions/k1/requests/q1`
  await at('claim', 'PUT', `${question}/claim?run=${run}`, operator)
  await at('claim 403', 'PUT', `${question}/claim?run=${run}`, viewer)
  await at('answer 404', 'GET', `${question}/answer?run=${run}`, viewer)
  await at('release', 'DELETE', `${question}/claim?run=${run}`, operator)
  await at('release 409', 'DELETE', `${question}/claim?run=${run}`, operator)
  // The report, with a week of records.
  await seedWeek(app.teamReport.store, Date.now())
  await at('report', 'GET', '/api/report?window=7d', admin)
  await at('report 400', 'GET', '/api/report?window=1y', admin)
  await at('report csv', 'GET', '/api/report.csv?window=24h', admin)
  // Who you are, a cookie session, linked accounts, the document.
  await at('me', 'GET', '/auth/me', viewer)
  await at('me 401', 'GET', '/auth/me')
  await at('session', 'POST', '/auth/session', viewer)
  await at('chat links', 'GET', '/api/chat-links', viewer)
  await at('openapi', 'GET', '/api/openapi.json', viewer)
  await at('openapi 401', 'GET', '/api/openapi.json')
  // The console's pages and redirects.
  await at('console', 'GET', '/', viewer)
  await at('console session', 'GET', '/sessions/k1', viewer)
  await at('report page 403', 'GET', '/report', viewer)
  await at('sessions', 'GET', '/sessions')
  await at('login 404', 'GET', '/auth/login')
  await at('logged out', 'GET', '/auth/logged-out')
  // Removing the session.
  await at('delete', 'DELETE', '/admin/sessions/k1', admin)
  await at('delete 404', 'DELETE', '/admin/sessions/k1', admin)

  assert.deepEqual(statuses, {
    healthz: 200,
    readyz: 200,
    metrics: 200,
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
    claim: 200,
    'claim 403': 403,
    'answer 404': 404,
    release: 204,
    'release 409': 409,
    report: 200,
    'report 400': 400,
    'report csv': 200,
    me: 200,
    'me 401': 401,
    session: 201,
    'chat links': 200,
    openapi: 200,
    'openapi 401': 401,
    console: 200,
    'console session': 200,
    'report page 403': 403,
    sessions: 308,
    'login 404': 404,
    'logged out': 200,
    delete: 204,
    'delete 404': 404,
  })
  assert.deepEqual(checked.violations, [])
  // The hook saw the JSON answers (it cannot pass by not running).
  for (const answer of [
    'GET /admin/sessions 200',
    'GET /admin/audit 200',
    'GET /api/report 200',
    'GET /api/sessions/:kasmId/activity 200',
    'PUT /admin/sessions/:kasmId 400',
    'GET /auth/me 200',
  ])
    assert.ok(checked.json.has(answer), answer)
})
