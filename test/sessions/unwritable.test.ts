import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { Redis } from 'ioredis'
import { TEST_ENCRYPTION_KEY } from '../cluster/cluster-harness.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix } from '../cluster/redis-harness.ts'
import { startFakeKasm } from '../fixtures/kasm-api.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { API_KEY, API_SECRET } from '../kasm/helpers.ts'
import { captureLogs } from './capture-logs.ts'

/**
 * Issue 24: a replica that cannot open the stored records (a key it lacks) must not take registry writes: it
 * would seal them with its own key, and the replicas that could read everything would become unready.
 */

const UNKNOWN_KEY = 'VW5rbm93bi1rZXktb2YtMzItYnl0ZXMtZm9yLXRlc3Q'

async function call(
  gw: TestGateway,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

async function gateway(t: TestContext, env: Record<string, string>): Promise<TestGateway> {
  const gw = await startGateway({ REDIS_URL: REDIS_TEST_URL, ...env })
  t.after(() => gw.close())
  return gw
}

test('a replica with records it cannot open refuses registry writes (503), so healthy replicas stay ready', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const kasm = await startFakeKasm({ auth: 'body' })
  t.after(() => kasm.close())
  const good = await gateway(t, { GATEWAY_REDIS_PREFIX: prefix, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY })
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const registration = (kasmId: string) => ({
    upstream: `http://127.0.0.1:9/${kasmId}/`,
    team: 'blue',
    messagingToken: 'a-messaging-token-of-the-orchestrator',
  })
  assert.equal((await call(good, 'PUT', '/admin/sessions/w-1', admin, registration('w-1'))).status, 201)
  assert.equal((await call(good, 'PUT', '/admin/sessions/w-2', admin, registration('w-2'))).status, 201)

  // A replica started with a key the others do not have (a mistyped Secret), with Kasm configured.
  const wrong = await gateway(t, {
    GATEWAY_REDIS_PREFIX: prefix,
    GATEWAY_ENCRYPTION_KEY: UNKNOWN_KEY,
    GATEWAY_KASM_API_URL: kasm.url,
    GATEWAY_KASM_API_KEY: API_KEY,
    GATEWAY_KASM_API_SECRET: API_SECRET,
    GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-{kasmId}.sessions.internal:9434/',
    GATEWAY_KASM_USER_ID: 'a1b2c3d4e5f60718293a4b5c6d7e8f90',
    GATEWAY_KASM_SYNC_S: '0',
  })
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  const before = await redis.hgetall(`${prefix}sessions`)

  const refusals: [string, string, unknown][] = [
    ['PUT', '/admin/sessions/w-3', registration('w-3')],
    ['POST', '/admin/sessions', { image: 'Chrome', team: 'blue' }],
    ['DELETE', '/admin/sessions/w-1', undefined],
  ]
  for (const [method, path, body] of refusals) {
    const res = await call(wrong, method, path, admin, body)
    assert.deepEqual([res.status, res.body.error], [503, 'registry_unreadable'], `${method} ${path}`)
    assert.match(
      String(res.body.message),
      /^this replica cannot open 2 stored session records \(unknown_key: 2\)/,
      `${method} ${path}`,
    )
    assert.match(String(res.body.message), /GET \/admin\/unreadable-sessions/)
  }
  assert.deepEqual(await redis.hgetall(`${prefix}sessions`), before, 'nothing written or deleted')
  assert.deepEqual(
    kasm.calls.filter((c) => c.call === 'request_kasm'),
    [],
    'no Kasm session was started for a launch the replica could not register',
  )
  assert.equal((await fetch(`${good.url}/readyz`)).status, 200, 'the healthy replica stays ready')

  // The healthy replica writes as before; once nothing is unreadable to the other one, it writes too.
  assert.equal((await call(good, 'PUT', '/admin/sessions/w-3', admin, registration('w-3'))).status, 201)
  for (const kasmId of ['w-1', 'w-2', 'w-3'])
    assert.equal((await call(wrong, 'DELETE', `/admin/unreadable-sessions/${kasmId}`, admin)).status, 204)
  assert.equal((await call(wrong, 'PUT', '/admin/sessions/w-4', admin, registration('w-4'))).status, 201)
})

test('a replica that cannot open the stored records boots not ready without sealing its sessions file', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const dir = await mkdtemp(join(tmpdir(), 'krg-unwritable-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'sessions.yaml')
  await writeFile(
    file,
    'sessions:\n  - {kasmId: f-1, upstream: "http://127.0.0.1:9/f-1/", team: blue, messagingToken: file-token-1}\n',
  )
  const env = { GATEWAY_REDIS_PREFIX: prefix, GATEWAY_SESSIONS_FILE: file }
  const good = await gateway(t, { ...env, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY })
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  const stored = await redis.hget(`${prefix}sessions`, 'f-1')
  assert.ok(stored, 'the healthy replica applied the file')

  const logs = captureLogs()
  const wrong = await startGateway(
    { REDIS_URL: REDIS_TEST_URL, ...env, GATEWAY_ENCRYPTION_KEY: UNKNOWN_KEY },
    { logger: logs.logger },
  )
  t.after(() => wrong.close())
  const ready = await fetch(`${wrong.url}/readyz`)
  assert.equal(ready.status, 503)
  assert.match(
    ((await ready.json()) as { checks: { sessions: string } }).checks.sessions,
    /^1 stored session token\(s\) cannot be decrypted/,
  )
  assert.match(
    logs.text(),
    /"reason":"this replica cannot open 1 stored session record \(unknown_key: 1\).*"msg":"sessions file not applied"/,
  )
  assert.equal(await redis.hget(`${prefix}sessions`, 'f-1'), stored, 'the record is the healthy replica’s')
  assert.equal((await fetch(`${good.url}/readyz`)).status, 200)
})
