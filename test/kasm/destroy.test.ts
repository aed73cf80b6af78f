import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { startGateway } from '../helpers/gateway.ts'
import { waitFor as until } from '../helpers/wait.ts'
import { GATEWAY_USER, kasmEnv, kasmSetup } from './helpers.ts'

/**
 * Issue 24: `DELETE /admin/sessions/<launched>` ends the Kasm session too. Its messaging token lives only in
 * the session's environment and the registry; unregistered alone, it would run on with a token nobody holds.
 */

test('deleting a launched session destroys it in Kasm as its user, then unregisters it; audited as a destroy', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t)
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(launched.status, 201, launched.text)
  const kasmId = String(launched.body.kasmId)
  const [session] = [...kasm.sessions.values()]
  assert.ok(session?.runtime)

  const deleted = await call('DELETE', `/admin/sessions/${kasmId}`)
  assert.equal(deleted.status, 204, deleted.text)
  assert.equal(kasm.sessions.size, 0, 'Kasm no longer has it')
  assert.equal(kasm.calls.at(-1)?.call, 'destroy_kasm')
  assert.equal(await gw.app.sessions.get(kasmId), undefined)
  const records = (await call('GET', `/admin/audit?kasmId=${kasmId}`)).body.records as AuditRecord[]
  assert.deepEqual(
    records.map((r) => [r.method, r.action, r.status, r.outcome, r.team]),
    [
      ['DELETE', 'destroy', 204, 'forwarded', 'blue'],
      ['POST', 'launch', 201, 'forwarded', 'blue'],
    ],
  )
})

test('Kasm refusing or unreachable: 502 kasm_destroy_failed, the session stays registered and running', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t)
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  const kasmId = String(launched.body.kasmId)

  kasm.failNextDestroy('Unable to destroy the session right now')
  const refused = await call('DELETE', `/admin/sessions/${kasmId}`)
  assert.deepEqual([refused.status, refused.body.error], [502, 'kasm_destroy_failed'], refused.text)
  assert.match(
    String(refused.body.message),
    /^Kasm refused destroy_kasm: Unable to destroy the session right now/,
  )
  assert.match(String(refused.body.message), /the session still runs in Kasm and stays registered: retry/)
  assert.ok(await gw.app.sessions.get(kasmId), 'still registered')
  assert.equal(kasm.sessions.size, 1, 'still running')

  await kasm.setDown('refuse')
  const down = await call('DELETE', `/admin/sessions/${kasmId}`)
  assert.deepEqual([down.status, down.body.error], [502, 'kasm_destroy_failed'], down.text)
  assert.match(String(down.body.message), /^Kasm's Developer API cannot be reached/)
  assert.ok(await gw.app.sessions.get(kasmId))
  await kasm.setDown(null)

  const again = await call('DELETE', `/admin/sessions/${kasmId}`)
  assert.equal(again.status, 204, again.text)
  assert.equal(kasm.sessions.size, 0)
  const records = (await call('GET', `/admin/audit?kasmId=${kasmId}`)).body.records as AuditRecord[]
  assert.deepEqual(
    records.filter((r) => r.method === 'DELETE').map((r) => [r.action, r.status, r.error]),
    [
      ['destroy', 204, undefined],
      ['destroy', 502, 'kasm_destroy_failed'],
      ['destroy', 502, 'kasm_destroy_failed'],
    ],
  )
})

test('a launched session Kasm already ended is unregistered; a hand-registered one only unregistered', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t)
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  const kasmId = String(launched.body.kasmId)
  const [session] = [...kasm.sessions.values()]
  assert.ok(session)
  // Ended in Kasm (expiry, a user), and no sync to notice: destroy_kasm is refused, get_kasms lists it no more.
  await kasm.destroy(session.id)
  const gone = await call('DELETE', `/admin/sessions/${kasmId}`)
  assert.equal(gone.status, 204, gone.text)
  assert.deepEqual(
    kasm.calls.slice(-2).map((c) => c.call),
    ['destroy_kasm', 'get_kasms'],
  )
  assert.equal(await gw.app.sessions.get(kasmId), undefined)

  // Registered by hand (an orchestrator's own Kasm session, lifecycle "kasm"): left to its owner in Kasm.
  const own = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  const ownKasm = [...kasm.sessions.values()][0]
  assert.ok(ownKasm)
  assert.equal((await call('DELETE', `/admin/sessions/${own.body.kasmId}`)).status, 204)
  const put = await call('PUT', '/admin/sessions/hand-1', {
    body: { upstream: 'http://10.0.0.1:9434/', team: 'blue', messagingToken: 'tok-hand', lifecycle: 'kasm' },
  })
  assert.equal(put.status, 201)
  const before = kasm.calls.length
  assert.equal((await call('DELETE', '/admin/sessions/hand-1')).status, 204)
  assert.deepEqual(kasm.calls.slice(before), [], 'Kasm not called')
  const records = (await call('GET', '/admin/audit?kasmId=hand-1')).body.records as AuditRecord[]
  assert.equal(records[0]?.action, 'delete')
})

test('cluster: the Kasm user is stored with the record; a replica without Kasm refuses (409) instead of orphaning it', async (t) => {
  const redis = sharedRedisEnv(t)
  const { kasm, call, admin, runtimePort } = await kasmSetup(t, { env: redis })
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(launched.status, 201, launched.text)
  const kasmId = String(launched.body.kasmId)
  const remove = (url: string) =>
    fetch(`${url}/admin/sessions/${kasmId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    })

  const plain = await startGateway(redis)
  t.after(() => plain.close())
  const refused = await remove(plain.url)
  const body = (await refused.json()) as { error: string; message: string }
  assert.deepEqual([refused.status, body.error], [409, 'session_conflict'])
  assert.match(body.message, /launched through Kasm's Developer API, which this gateway no longer has/)
  assert.equal(kasm.sessions.size, 1)

  // Another replica with Kasm, which has the record (and its Kasm user) only from Redis, destroys it.
  const other = await startGateway({ ...kasmEnv(kasm, runtimePort, 'body'), ...redis })
  t.after(() => other.close())
  assert.equal((await other.app.sessions.get(kasmId))?.kasmUserId, GATEWAY_USER)
  assert.equal((await remove(other.url)).status, 204)
  assert.equal(kasm.sessions.size, 0)
  await until(
    'every replica unregistered it',
    async () => (await plain.app.sessions.get(kasmId)) === undefined,
  )
})
