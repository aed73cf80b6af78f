import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { bearer } from '../helpers/jwt.ts'
import { send, startProxy } from '../upstream/support.ts'

test('GET /admin/audit shows an admin of some teams only their sessions; a foreign kasmId is 404', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const root = `Bearer ${await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })}`
  const blueAdmin = `Bearer ${await bearer({ sub: 'bea', roles: ['admin'], teams: ['blue'] })}`
  const redAdmin = `Bearer ${await bearer({ sub: 'rex', roles: ['admin'], teams: ['red'] })}`
  const redOperator = `Bearer ${await bearer({ sub: 'rita', roles: ['operator'], teams: ['red'] })}`
  const redViewer = `Bearer ${await bearer({ sub: 'rvic', roles: ['viewer'], teams: ['red'] })}`
  const json = { 'content-type': 'application/json' }
  const put = (kasmId: string, team: string, authorization: string) =>
    send(gw.url, {
      method: 'PUT',
      path: `/admin/sessions/${kasmId}`,
      headers: { authorization, ...json },
      body: JSON.stringify({
        upstream: `${echo.origin}/base/${kasmId}/`,
        team,
        messagingToken: `tok-${kasmId}-123456`,
      }),
    })
  const post = (kasmId: string, authorization?: string) =>
    send(gw.url, {
      method: 'POST',
      path: `/desktop/${kasmId}/mcp/messages`,
      headers: { ...(authorization ? { authorization } : {}), ...json },
      body: '{"run":"r","key":"k","text":"hi"}',
    })
  assert.equal((await put('r1', 'red', root)).status, 201)
  assert.equal((await put('r2', 'red', root)).status, 201)
  assert.equal((await post('k1', auth.operator)).status, 200)
  assert.equal((await post('r1', redOperator)).status, 200)
  // Refused before anyone is known, and blue's attempt on red's session: neither is filed under red.
  assert.equal((await post('r1')).status, 401)
  assert.equal((await put('r1', 'blue', blueAdmin)).status, 403)
  // A refusal of someone of red's is red's.
  assert.equal((await post('r1', redViewer)).status, 403)
  assert.equal(
    (await send(gw.url, { method: 'DELETE', path: '/admin/sessions/r2', headers: { authorization: root } }))
      .status,
    204,
  )
  assert.equal((await post('nope', auth.operator)).status, 404)

  const read = async (authorization: string, query = '') => {
    const res = await send(gw.url, { path: `/admin/audit${query}`, headers: { authorization } })
    return { status: res.status, body: JSON.parse(res.text) as { records?: AuditRecord[]; error?: string } }
  }
  const summary = (records: AuditRecord[] = []) =>
    records.map((r) => `${r.method} ${r.kasmId} ${r.status} ${r.team}`)

  const blue = await read(blueAdmin)
  assert.equal(blue.status, 200)
  assert.deepEqual(summary(blue.body.records), ['POST k1 200 blue'])
  const red = await read(redAdmin)
  assert.deepEqual(summary(red.body.records), [
    'DELETE r2 204 red',
    'POST r1 403 red',
    'POST r1 200 red',
    'PUT r2 201 red',
    'PUT r1 201 red',
  ])
  // Every team's admin sees everything, including what named no registered session.
  const all = await read(root)
  assert.deepEqual(summary(all.body.records).slice(0, 2), ['POST nope 404 null', 'DELETE r2 204 red'])
  assert.equal(all.body.records?.length, 9)
  assert.deepEqual(
    all.body.records?.filter((r) => r.team === null && r.kasmId === 'r1').map((r) => [r.sub, r.status]),
    [
      ['bea', 403],
      [null, 401],
    ],
  )

  // A foreign session, a removed one and one that never existed look the same to blue's admin.
  for (const kasmId of ['r1', 'r2', 'never']) {
    const refused = await read(blueAdmin, `?kasmId=${kasmId}`)
    assert.equal(refused.status, 404, kasmId)
    const { requestId, ...body } = refused.body as { requestId?: string }
    assert.deepEqual(body, { error: 'session_not_found', message: 'no such session' })
    assert.equal(typeof requestId, 'string')
  }
  assert.deepEqual(summary((await read(blueAdmin, '?kasmId=k1')).body.records), ['POST k1 200 blue'])
  assert.deepEqual(summary((await read(blueAdmin, '?sub=rita')).body.records), [])
  // An admin of every team may still ask after a removed session.
  assert.deepEqual(summary((await read(root, '?kasmId=r2')).body.records), [
    'DELETE r2 204 red',
    'PUT r2 201 red',
  ])
})
