import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openSse } from '../events/helpers.ts'
import { tableLookup } from '../fixtures/dns.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { send, startEcho } from './support.ts'

/** A gateway whose DNS answers from `table` (mutable: a test rebinds names), loopback not allowed by default. */
async function start(t: TestContext, table: Record<string, string[]>, env: Record<string, string> = {}) {
  const app = await buildApp(loadConfig(testEnv({ GATEWAY_UPSTREAM_ALLOW: '', ...env })), {
    lookup: tableLookup(table),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const url = `http://127.0.0.1:${address.port}`
  const admins = {
    root: `Bearer ${await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })}`,
    blue: `Bearer ${await bearer({ sub: 'bea', roles: ['admin'], teams: ['blue'] })}`,
    red: `Bearer ${await bearer({ sub: 'rex', roles: ['admin'], teams: ['red'] })}`,
  }
  const put = async (kasmId: string, body: Record<string, string>, authorization = admins.root) => {
    const res = await send(url, {
      method: 'PUT',
      path: `/admin/sessions/${kasmId}`,
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ team: 'blue', messagingToken: 'tok-policy-0123456789', ...body }),
    })
    return { status: res.status, body: JSON.parse(res.text) as Record<string, unknown> }
  }
  return { app, url, admins, put }
}

test('the admin API refuses every upstream a default policy forbids, naming why, storing nothing', async (t) => {
  const { app, put } = await start(t, { localhost: ['127.0.0.1'], 'meta.test': ['169.254.169.254'] })
  const inputs = [
    'http://127.0.0.1:6379/',
    'http://[::ffff:169.254.169.254]/',
    'http://0x7f000001/',
    'http://2130706433:9434/',
    'http://0177.0.0.1/',
    'http://localhost:9434/',
    'http://[::1]/',
    'http://0.0.0.0/',
    'http://169.254.169.254/',
    'http://meta.test/',
    'http://[fe80::1]/',
    'http://224.0.0.1/',
    'http://[64:ff9b::a9fe:a9fe]/',
  ]
  for (const upstream of inputs) {
    const res = await put('k1', { upstream })
    assert.equal(res.status, 400, upstream)
    assert.equal(res.body.error, 'upstream_not_allowed', upstream)
    assert.match(String(res.body.message), /^upstream: host .* resolves to a/, upstream)
    assert.ok(!String(res.body.message).includes('tok-policy'))
  }
  assert.equal(await app.sessions.get('k1'), undefined)
  assert.equal((await put('k1', { upstream: 'http://10.20.0.15:9434/' })).status, 201)
  // A name without a DNS record yet is judged when it gets one: on every connection.
  assert.equal((await put('k2', { upstream: 'http://not-yet.test/' })).status, 201)
  const records = await app.audit.recent({ limit: 100 })
  assert.equal(records.filter((r) => r.error === 'upstream_not_allowed').length, inputs.length)
})

test('GATEWAY_UPSTREAM_ALLOW limits the hosts; the template origin is trusted whatever it resolves to', async (t) => {
  const echo = await startEcho(t)
  const port = new URL(echo.origin).port
  const { put, url } = await start(
    t,
    { 'runtime.kasm.internal': ['10.1.0.5'], 'other.test': ['10.1.0.6'] },
    { GATEWAY_UPSTREAM_ALLOW: '*.kasm.internal', GATEWAY_UPSTREAM_TEMPLATE: `${echo.origin}/base/{kasmId}/` },
  )
  assert.equal((await put('a1', { upstream: 'http://runtime.kasm.internal:9434/' })).status, 201)
  const other = await put('a2', { upstream: 'http://other.test/' })
  assert.equal(other.status, 400)
  assert.match(String(other.body.message), /not in GATEWAY_UPSTREAM_ALLOW/)
  // Built from the template, or given explicitly at its origin: the deployer's own runtime.
  assert.equal((await put('t1', {})).status, 201)
  assert.equal((await put('t2', { upstream: `${echo.origin}/base/t2/` })).status, 201)
  assert.equal((await put('t3', { upstream: `http://127.0.0.1:${Number(port) + 1}/` })).status, 400)
  const operator = `Bearer ${await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] })}`
  const res = await send(url, { path: '/desktop/t1/mcp/inbox', headers: { authorization: operator } })
  assert.equal(res.status, 200)
  assert.equal(echo.received.at(-1)?.url, '/base/t1/inbox')
})

test("another team's upstream, however it is spelled, cannot be registered again", async (t) => {
  const { put, admins } = await start(t, {
    'runtime.test': ['10.20.0.16'],
    'alias.test': ['10.20.0.16'],
    'unrelated.test': ['10.20.0.17'],
  })
  assert.equal((await put('r1', { team: 'red', upstream: 'http://runtime.test:9434/base/r1/' })).status, 201)
  for (const upstream of [
    'http://runtime.test:9434/base/r1/',
    'http://RUNTIME.test:9434//base/r1',
    'http://runtime.test.:9434/base/%72%31/',
    'http://alias.test:9434/base/r1/',
    'http://10.20.0.16:9434/base/r1/',
  ]) {
    const res = await put('b1', { team: 'blue', upstream }, admins.blue)
    assert.equal(res.status, 409, upstream)
    assert.equal(res.body.error, 'upstream_conflict')
  }
  assert.equal(
    (await put('b1', { team: 'blue', upstream: 'http://runtime.test:9434/base/b1/' }, admins.blue)).status,
    201,
  )
  assert.equal(
    (await put('b2', { team: 'blue', upstream: 'http://unrelated.test:9434/base/r1/' }, admins.blue)).status,
    201,
  )
  // The same team may point two sessions at one runtime (a session re-registered under a new id).
  assert.equal(
    (await put('r2', { team: 'red', upstream: 'http://runtime.test:9434/base/r1/' }, admins.red)).status,
    201,
  )
})

test('a name rebound to loopback after registration is refused at connect time: requests and event streams', async (t) => {
  const echo = await startEcho(t)
  const port = new URL(echo.origin).port
  const table: Record<string, string[]> = { 'rebind.test': ['10.20.0.99'] }
  const { app, url, put } = await start(t, table, { GATEWAY_UPSTREAM_RETRY_SCALE: '0.01' })
  assert.equal((await put('rb', { upstream: `http://rebind.test:${port}/base/rb/` })).status, 201)
  table['rebind.test'] = ['127.0.0.1']
  const operator = `Bearer ${await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] })}`
  const res = await send(url, { path: '/desktop/rb/mcp/inbox', headers: { authorization: operator } })
  assert.equal(res.status, 502)
  assert.deepEqual(JSON.parse(res.text), {
    error: 'upstream_address_refused',
    message: 'the session runtime resolves to an address the gateway may not connect to',
    requestId: res.headers['x-request-id'],
  })
  const viewer = await openSse(`${url}/desktop/rb/mcp/events`, { authorization: operator })
  t.after(() => viewer.close())
  await waitFor('the reader to be refused', async () =>
    /reason="address_refused"\} [1-9]/.test(
      await app.metrics.registry.getSingleMetricAsString('krg_event_upstream_reconnects_total'),
    ),
  )
  assert.deepEqual(echo.received, [], 'nothing reached the loopback runtime')
  // An address literal registered some other way is checked the same way when connecting.
  await app.sessions.put({
    kasmId: 'lit',
    upstream: `${echo.origin}/base/lit/`,
    team: 'blue',
    messagingToken: 'tok-literal-0123456789',
    source: 'admin',
  })
  const literal = await send(url, { path: '/desktop/lit/mcp/inbox', headers: { authorization: operator } })
  assert.equal(literal.status, 502)
  assert.equal(JSON.parse(literal.text).error, 'upstream_address_refused')
  assert.deepEqual(echo.received, [])
  assert.match(
    await app.metrics.registry.getSingleMetricAsString('krg_upstream_errors_total'),
    /reason="address_refused"\} [1-9]/,
  )
})

test('with loopback allowed as a CIDR the same rebound name connects (the control)', async (t) => {
  const echo = await startEcho(t)
  const port = new URL(echo.origin).port
  const table: Record<string, string[]> = { 'rebind.test': ['10.20.0.99'] }
  const { url, put } = await start(t, table, { GATEWAY_UPSTREAM_ALLOW: '127.0.0.1/32,10.0.0.0/8' })
  assert.equal((await put('rb', { upstream: `http://rebind.test:${port}/base/rb/` })).status, 201)
  table['rebind.test'] = ['127.0.0.1']
  const operator = `Bearer ${await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] })}`
  const res = await send(url, { path: '/desktop/rb/mcp/inbox', headers: { authorization: operator } })
  assert.equal(res.status, 200)
  assert.equal(echo.received.at(-1)?.url, '/base/rb/inbox')
})
