import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { Redis } from 'ioredis'
import type { AuditRecord } from '../../src/audit/types.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { Secret } from '../../src/sessions/secret.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { captureLogs } from '../sessions/capture-logs.ts'
import { TEST_ENCRYPTION_KEY, TOKEN } from './cluster-harness.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix, until } from './redis-harness.ts'

/** Records no configured key opens: reported by readiness and the admin API, deleted only by an admin. */

const UNKNOWN_KEY = 'VW5rbm93bi1rZXktb2YtMzItYnl0ZXMtZm9yLXRlc3Q'

async function gateway(t: TestContext, prefix: string, key: string): Promise<TestGateway> {
  const gw = await startGateway({
    REDIS_URL: REDIS_TEST_URL,
    GATEWAY_ENCRYPTION_KEY: key,
    GATEWAY_REDIS_PREFIX: prefix,
  })
  t.after(() => gw.close())
  return gw
}

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

async function readiness(gw: TestGateway): Promise<{ status: number; sessions: string }> {
  const res = await fetch(`${gw.url}/readyz`)
  const body = (await res.json()) as { checks: Record<string, string> }
  return { status: res.status, sessions: body.checks.sessions ?? '' }
}

const admin = () => bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })

test('a replica with only an unknown key stays unready and lists the sessions it cannot open', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const good = await gateway(t, prefix, TEST_ENCRYPTION_KEY)
  const token = await admin()
  for (const [kasmId, team] of [
    ['u-1', 'blue'],
    ['u-2', 'red'],
  ]) {
    // One runtime each: an upstream already serving another team's session would be refused (409).
    const put = await call(good, 'PUT', `/admin/sessions/${kasmId}`, token, {
      upstream: `http://127.0.0.1:9/${kasmId}/`,
      team,
      messagingToken: 'a-messaging-token-that-stays-secret',
    })
    assert.equal(put.status, 201)
  }

  const logs = captureLogs()
  const wrong = await startGateway(
    { REDIS_URL: REDIS_TEST_URL, GATEWAY_ENCRYPTION_KEY: UNKNOWN_KEY, GATEWAY_REDIS_PREFIX: prefix },
    { logger: logs.logger },
  )
  t.after(() => wrong.close())
  const ready = await readiness(wrong)
  assert.equal(ready.status, 503)
  assert.match(ready.sessions, /^2 stored session token\(s\) cannot be decrypted/)

  const all = await call(wrong, 'GET', '/admin/unreadable-sessions', token)
  assert.equal(all.status, 200)
  assert.deepEqual(all.body.sessions, [
    { kasmId: 'u-1', team: 'blue', reason: 'unknown_key' },
    { kasmId: 'u-2', team: 'red', reason: 'unknown_key' },
  ])
  const blueAdmin = await bearer({ sub: 'bo', roles: ['admin'], teams: ['blue'] })
  const blue = await call(wrong, 'GET', '/admin/unreadable-sessions', blueAdmin)
  assert.deepEqual(blue.body.sessions, [{ kasmId: 'u-1', team: 'blue', reason: 'unknown_key' }])
  const operator = await bearer({ sub: 'op', roles: ['operator'], teams: ['*'] })
  assert.equal((await call(wrong, 'GET', '/admin/unreadable-sessions', operator)).status, 403)
  // The sessions are not served by the replica that cannot open them, and nothing was deleted.
  const inbox = await call(wrong, 'GET', '/desktop/u-1/mcp/inbox', token)
  assert.deepEqual([inbox.status, inbox.body.error], [404, 'session_not_found'])
  const metrics = await (await fetch(`${wrong.url}/metrics`)).text()
  assert.match(metrics, /^krg_sessions_unreadable 2$/m)
  assert.equal((await readiness(good)).status, 200, 'the replica with the right key is unaffected')
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  assert.equal(await redis.hlen(`${prefix}sessions`), 2)
  assert.ok(!logs.text().includes('a-messaging-token-that-stays-secret'))
})

test('a tampered record is refused, reported and deletable by an admin, audited; the rest keeps working', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const runtime = await startSimulatedRuntime({ messagingToken: TOKEN })
  t.after(() => runtime.close())
  const gw = await gateway(t, prefix, TEST_ENCRYPTION_KEY)
  const token = await admin()
  for (const kasmId of ['t-good', 't-bad']) {
    const body = { upstream: runtime.url, team: 'blue', messagingToken: TOKEN }
    assert.equal((await call(gw, 'PUT', `/admin/sessions/${kasmId}`, token, body)).status, 201)
  }
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())

  // One changed byte of the ciphertext, announced as any write would be.
  const stored = JSON.parse((await redis.hget(`${prefix}sessions`, 't-bad')) as string) as { token: string }
  const parts = stored.token.split('.')
  const cipher = Buffer.from(parts[3] as string, 'base64url')
  cipher[0] = (cipher[0] as number) ^ 1
  parts[3] = cipher.toString('base64url')
  await redis.hset(`${prefix}sessions`, 't-bad', JSON.stringify({ ...stored, token: parts.join('.') }))
  await redis.publish(`${prefix}sessions:changed`, 'someone-else t-bad')

  await until('the tampered record is reported', async () => (await readiness(gw)).status === 503)
  assert.match((await readiness(gw)).sessions, /^1 stored session token\(s\) cannot be decrypted/)
  const listed = await call(gw, 'GET', '/admin/unreadable-sessions', token)
  assert.deepEqual(listed.body.sessions, [{ kasmId: 't-bad', team: 'blue', reason: 'undecryptable' }])
  assert.equal((await call(gw, 'GET', '/admin/sessions/t-bad', token)).status, 404)
  // The other session still reaches its runtime.
  const write = await call(gw, 'POST', '/desktop/t-good/mcp/messages', token, {
    run: runtime.run,
    key: 'k1',
    text: 'still here',
  })
  assert.equal(write.status, 202)

  // Deleting: refused for a session that is not unreadable, and for an admin of another team.
  assert.equal((await call(gw, 'DELETE', '/admin/unreadable-sessions/t-good', token)).status, 404)
  const redAdmin = await bearer({ sub: 'rudi', roles: ['admin'], teams: ['red'] })
  assert.equal((await call(gw, 'DELETE', '/admin/unreadable-sessions/t-bad', redAdmin)).status, 404)
  assert.equal(await redis.hexists(`${prefix}sessions`, 't-bad'), 1)
  assert.equal((await call(gw, 'DELETE', '/admin/unreadable-sessions/t-bad', token)).status, 204)
  assert.equal(await redis.hexists(`${prefix}sessions`, 't-bad'), 0)
  assert.equal((await readiness(gw)).status, 200)
  assert.deepEqual((await call(gw, 'GET', '/admin/unreadable-sessions', token)).body.sessions, [])

  const audit = await call(gw, 'GET', '/admin/audit?kasmId=t-bad', token)
  const records = audit.body.records as AuditRecord[]
  const deletions = records.filter((r) => r.route === 'admin/unreadable-sessions')
  assert.deepEqual(
    deletions.map((r) => [r.sub, r.method, r.action, r.status, r.outcome]),
    [
      ['ada', 'DELETE', 'delete', 204, 'forwarded'],
      ['rudi', 'DELETE', 'delete', 404, 'refused'],
    ],
  )
})

test('deleting an unreadable record never deletes a readable one written since', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const gw = await gateway(t, prefix, TEST_ENCRYPTION_KEY)
  const token = await admin()
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  await redis.hset(`${prefix}sessions`, 'x-1', '{"not": "a session"')
  await redis.publish(`${prefix}sessions:changed`, 'someone-else x-1')
  await until('reported', async () => (await gw.app.sessions.unreadable()).length === 1)
  assert.equal((await gw.app.sessions.unreadable())[0]?.team, null)
  // A team admin does not see a record whose team cannot be read; an admin of every team does.
  const blueAdmin = await bearer({ sub: 'bo', roles: ['admin'], teams: ['blue'] })
  assert.deepEqual((await call(gw, 'GET', '/admin/unreadable-sessions', blueAdmin)).body.sessions, [])
  // Meanwhile another replica replaced it with a good record, its announcement not yet here: the delete
  // must leave the good record alone.
  const vault = gw.app.cluster?.vault
  assert.ok(vault)
  const good = JSON.stringify({
    kasmId: 'x-1',
    upstream: 'http://127.0.0.1:9/',
    team: 'blue',
    source: 'admin',
    version: 1,
    token: await vault.seal('x-1', new Secret(TOKEN)),
  })
  await redis.hset(`${prefix}sessions`, 'x-1', good)
  assert.equal((await call(gw, 'DELETE', '/admin/unreadable-sessions/x-1', token)).status, 404)
  assert.equal(await redis.hget(`${prefix}sessions`, 'x-1'), good)
})
