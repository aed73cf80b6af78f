import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import type { AuditRecord } from '../../src/audit/types.ts'
import { loadConfig } from '../../src/config.ts'
import { UpstreamUnreachable } from '../../src/errors.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { captureLogs, waitFor } from '../sessions/capture-logs.ts'

/**
 * A real gateway plus one probe route standing in for the proxy: it fills `request.auditDetail` the way
 * routes/mcp does (the contract under test) and answers what the test asks.
 */
async function start(t: TestContext, overrides: Record<string, string> = {}) {
  const logs = captureLogs()
  const app: FastifyInstance = await buildApp(loadConfig(testEnv(overrides)), { logger: logs.logger })
  app.post<{ Params: { kasmId: string }; Querystring: { upstream?: string; fail?: string } }>(
    '/desktop/:kasmId/mcp/audit-probe',
    { onRequest: app.requireAccess('write') },
    async (request, reply) => {
      request.auditDetail.kasmId = request.params.kasmId
      request.auditDetail.route = 'actions'
      request.auditDetail.key = 'key-1'
      request.auditDetail.action = 'stop'
      if (request.query.fail) throw new UpstreamUnreachable()
      const upstream = Number(request.query.upstream ?? 202)
      request.auditDetail.upstreamStatus = upstream
      return reply.code(upstream).send({ ok: true })
    },
  )
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const url = `http://127.0.0.1:${address.port}`
  const auditLines = () =>
    logs
      .records()
      .filter((r) => r.msg === 'audit')
      .map((r) => r.audit as AuditRecord)
  return { app, url, logs, auditLines }
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  return { status: response.status, body: (await response.json()) as { error?: string } }
}

test('a forwarded write is recorded with the route detail, the operator and the upstream status', async (t) => {
  const gw = await start(t)
  const auth = { authorization: `Bearer ${await bearer({ sub: 'bob', roles: ['operator'] })}` }
  const text = 'the message text is never audited'
  const res = await post(`${gw.url}/desktop/k1/mcp/audit-probe`, { run: 'r1', key: 'key-1', text }, auth)
  assert.equal(res.status, 202)
  const [record] = await gw.app.audit.recent({ limit: 10 })
  assert.ok(record)
  const { at, requestId, latencyMs, clientIp, ...rest } = record
  assert.deepEqual(rest, {
    sub: 'bob',
    kasmId: 'k1',
    method: 'POST',
    route: 'actions',
    key: 'key-1',
    action: 'stop',
    outcome: 'forwarded',
    status: 202,
    upstreamStatus: 202,
    // k1 is not registered here: no team to file the record under (test/audit/teams.test.ts).
    team: null,
  })
  assert.ok(Math.abs(Date.parse(at) - Date.now()) < 60_000, at)
  // A UUIDv7: unique across replicas, in time order in the shared stream.
  assert.match(requestId, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.equal(clientIp, '127.0.0.1')
  assert.ok(latencyMs >= 0)

  await waitFor('audit log line', () => gw.auditLines().length === 1)
  assert.deepEqual(gw.auditLines()[0], record, 'the log line is the stored record')
  assert.equal(gw.logs.records().find((r) => r.msg === 'audit')?.level, 30)
  assert.ok(!gw.logs.text().includes(text), 'message text in the logs')

  // A runtime refusal passes through: still forwarded, with the runtime's status.
  const conflict = await post(`${gw.url}/desktop/k1/mcp/audit-probe?upstream=409`, {}, auth)
  assert.equal(conflict.status, 409)
  const [second] = await gw.app.audit.recent({ limit: 1 })
  assert.equal(second?.outcome, 'forwarded')
  assert.equal(second?.status, 409)
  assert.equal(second?.upstreamStatus, 409)
  assert.equal(second?.error, undefined)
})

test('a gateway failure on the way is recorded as refused with the error code the client got', async (t) => {
  const gw = await start(t)
  const auth = { authorization: `Bearer ${await bearer({ sub: 'bob' })}` }
  const res = await post(`${gw.url}/desktop/k1/mcp/audit-probe?fail=1`, {}, auth)
  assert.ok(res.status >= 500, String(res.status))
  const [record] = await gw.app.audit.recent({ limit: 1 })
  assert.equal(record?.outcome, 'refused')
  assert.equal(record?.status, res.status)
  assert.equal(record?.upstreamStatus, undefined)
  assert.equal(record?.error, res.body.error)
  assert.equal(record?.sub, 'bob')
})

test('refusals before any route are recorded, with the session from the URL and no credential', async (t) => {
  const gw = await start(t, { GATEWAY_MAX_JSON_BYTES: '1024' })
  const leak = 'tok-header-leak-123'

  const unauthenticated = await post(
    `${gw.url}/desktop/k1/mcp/messages`,
    { run: 'r', key: 'k', text: 'hello' },
    { 'x-kasm-runtime-session-token': leak },
  )
  assert.equal(unauthenticated.status, 401)
  const viewer = { authorization: `Bearer ${await bearer({ sub: 'vera', roles: ['viewer'] })}` }
  const forbidden = await post(
    `${gw.url}/desktop/k2/mcp/actions`,
    { run: 'r', key: 'k', action: 'stop' },
    viewer,
  )
  assert.equal(forbidden.status, 403)
  const malformed = await post(`${gw.url}/desktop/bad%20id/mcp/messages`, {})
  assert.ok(malformed.status >= 400)

  const [third, second, first] = await gw.app.audit.recent({ limit: 10 })
  assert.deepEqual(
    [first, second, third].map((r) => r && [r.sub, r.kasmId, r.route, r.outcome, r.status, r.error]),
    [
      [null, 'k1', 'messages', 'refused', 401, unauthenticated.body.error],
      ['vera', 'k2', 'actions', 'refused', 403, forbidden.body.error],
      [null, null, 'messages', 'refused', malformed.status, malformed.body.error],
    ],
  )
  assert.ok(!gw.logs.text().includes(leak), 'a credential header reached the logs')
})

test('an oversized body is recorded as refused', async (t) => {
  const gw = await start(t, { GATEWAY_MAX_JSON_BYTES: '1024' })
  const auth = { authorization: `Bearer ${await bearer({ sub: 'bob' })}` }
  const res = await post(`${gw.url}/desktop/k1/mcp/audit-probe`, { text: 'x'.repeat(4096) }, auth)
  assert.equal(res.status, 413)
  const [record] = await gw.app.audit.recent({ limit: 1 })
  assert.equal(record?.status, 413)
  assert.equal(record?.outcome, 'refused')
  assert.equal(record?.error, res.body.error)
  assert.equal(record?.kasmId, 'k1')
})

test('reads and writes elsewhere are not recorded; the buffer keeps GATEWAY_AUDIT_RECORDS', async (t) => {
  const gw = await start(t, { GATEWAY_AUDIT_RECORDS: '2' })
  const auth = { authorization: `Bearer ${await bearer({ sub: 'bob' })}` }
  await fetch(`${gw.url}/desktop/k1/mcp/messages`, { headers: auth })
  await fetch(`${gw.url}/desktop/k1/mcp/inbox`)
  await fetch(`${gw.url}/healthz`, { method: 'POST' })
  assert.deepEqual(await gw.app.audit.recent({ limit: 10 }), [])

  for (const upstream of [201, 202, 409])
    await post(`${gw.url}/desktop/k1/mcp/audit-probe?upstream=${upstream}`, {}, auth)
  const records = await gw.app.audit.recent({ limit: 10 })
  assert.deepEqual(
    records.map((r) => r.status),
    [409, 202],
  )
})
