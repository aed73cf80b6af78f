import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { auth, call } from './harness.ts'

test('every gateway route authenticates before reading the body: anonymous is 401, never 400/413/415', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const broken = { 'content-type': 'application/json' }
  const anonymous: [method: 'GET' | 'PUT' | 'POST' | 'DELETE', path: string, body?: string][] = [
    ['PUT', '/gateway/admin/sessions/x', '{"team": '],
    ['PUT', '/gateway/admin/sessions/x', 'x'.repeat(200_000)],
    ['DELETE', '/gateway/admin/sessions/x'],
    ['GET', '/gateway/admin/sessions'],
    ['GET', '/gateway/admin/audit?limit=banana'],
    ['GET', '/gateway/admin/sessions/x/presence'],
    ['GET', '/gateway/api/overview'],
    ['PUT', '/gateway/api/sessions/k1/requests/q1/claim'],
    ['GET', '/gateway/api/sessions/k1/requests/q1/answer'],
    ['GET', '/gateway/auth/me'],
    ['POST', '/gateway/auth/session', '{"broken": '],
    ['DELETE', '/gateway/auth/session'],
    ['GET', '/desktop/k1/mcp/events?after=banana'],
    ['POST', '/desktop/k1/mcp/messages', '{"run": '],
  ]
  for (const [method, path, body] of anonymous) {
    const res = await call(`${gw.url}${path}`, {
      method,
      headers: body === undefined ? {} : broken,
      ...(body === undefined ? {} : { body }),
    })
    assert.equal(res.status, 401, `${method} ${path}: ${JSON.stringify(res.body)}`)
    assert.equal(res.body.error, 'unauthenticated', `${method} ${path}`)
  }
  // Authenticated, the same broken body is read and refused for what it is.
  const admin = auth(await bearer({ roles: ['admin'] }))
  const refused = await call(`${gw.url}/gateway/admin/sessions/x`, {
    method: 'PUT',
    headers: { ...admin, ...broken },
    body: '{"team": ',
  })
  assert.equal(refused.status, 400)
  assert.equal(refused.body.error, 'bad_request')
  // The anonymous attempts were recorded as refused writes before authentication.
  const audit = await call(`${gw.url}/gateway/admin/audit?limit=50`, { headers: admin })
  const records = audit.body.records as {
    route: string
    status: number
    sub: string | null
    error?: string
  }[]
  const put = records.find((r) => r.route === 'admin/sessions' && r.sub === null)
  assert.equal(put?.status, 401)
  assert.equal(put?.error, 'unauthenticated')
})

test('the per-operator rate limit still counts per operator on routes authenticated in onRequest', async (t) => {
  const gw = await startGateway({ GATEWAY_RATE_LIMIT_MAX: '2' })
  t.after(() => gw.close())
  const alice = auth(await bearer({ sub: 'alice', roles: ['admin'] }))
  const bob = auth(await bearer({ sub: 'bob', roles: ['admin'] }))
  const statuses: number[] = []
  for (let i = 0; i < 3; i++)
    statuses.push((await call(`${gw.url}/admin/sessions`, { headers: alice })).status)
  assert.deepEqual(statuses, [200, 200, 429])
  // Same address, another operator: a budget of their own.
  assert.equal((await call(`${gw.url}/admin/sessions`, { headers: bob })).status, 200)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: bob })).status, 200)
  assert.equal((await call(`${gw.url}/auth/me`, { headers: bob })).status, 429)
})
