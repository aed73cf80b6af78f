import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { eventsAtLeast, fastEventEnv, openSse, until } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { kasmSetup } from './helpers.ts'

/** The Kasm sync: launched and Kasm-lifecycle sessions follow Kasm; hand-registered ones are only flagged. */

const metric = async (url: string, name: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text()
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN)
}

test('a session destroyed in Kasm is removed within one sync interval: viewers end, presence clears, audited', async (t) => {
  const { kasm, gw, call, admin } = await kasmSetup(t, { env: { ...fastEventEnv, GATEWAY_KASM_SYNC_S: '1' } })
  const first = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  const second = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(first.status, 201)
  assert.equal(second.status, 201)
  const gone = String(first.body.kasmId)
  const kept = String(second.body.kasmId)

  // A session Kasm knows, registered by hand with lifecycle "kasm" (an orchestrator that launches itself).
  const own = await fetch(kasm.url.replace(/\/$/, '/request_kasm'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      api_key: 'bMjMwTT0JKUQ',
      api_key_secret: 'KUNAvRw4KLHGmldBxhRUD5sAhWkvJVzS',
      image_id: kasm.images[0]?.image_id,
      environment: { KASM_RUNTIME_INBOX_TOKEN: 'orchestrator-minted-token' },
    }),
  })
  const ownId = ((await own.json()) as { kasm_id: string }).kasm_id
  const followed = await call('PUT', `/admin/sessions/${ownId}`, {
    body: {
      upstream: 'http://127.0.0.1:9/',
      team: 'blue',
      messagingToken: 'orchestrator-minted-token',
      lifecycle: 'kasm',
    },
  })
  assert.deepEqual([followed.status, followed.body.source], [201, 'kasm'])
  // Registered by hand, not in Kasm at all: flagged, never removed.
  const rt = await startSimulatedRuntime({ messagingToken: 'hand-token-0123456789' })
  t.after(() => rt.close())
  const hand = await call('PUT', '/admin/sessions/hand-1', {
    body: { upstream: rt.url, team: 'blue', messagingToken: 'hand-token-0123456789' },
  })
  assert.equal(hand.status, 201)

  const viewer = await openSse(`${gw.url}/desktop/${gone}/mcp/events`, { authorization: `Bearer ${admin}` })
  t.after(() => viewer.close())
  assert.equal(viewer.status, 200)
  await eventsAtLeast(viewer, 1)
  await until('presence counts the viewer', async () => (await gw.app.presence.of(gone)).viewers === 1)
  const session = [...kasm.sessions.values()].find((s) => s.dashed === gone)
  assert.ok(session?.runtime)
  await until('the reader is connected', () => session.runtime?.openEventStreams === 1)

  await until('the hand-registered session is flagged stale', async () => {
    const listed = await call('GET', '/admin/sessions')
    return (listed.body.sessions as { kasmId: string; staleSince?: string }[]).some(
      (s) => s.kasmId === 'hand-1' && s.staleSince !== undefined,
    )
  })
  // Syncs finished so far: the runs are numbered from 1, so the one under way now (if any) is the next number.
  const finished = async () =>
    ((await metric(gw.url, 'krg_kasm_sync_runs_total{result="ok"}')) || 0) +
    ((await metric(gw.url, 'krg_kasm_sync_runs_total{result="failed"}')) || 0)
  const finishedBefore = await finished()
  const destroyedAt = Date.now()
  await kasm.destroy(session.id)
  await kasm.destroy(ownId)
  await until('removed from the registry', async () => (await gw.app.sessions.get(gone)) === undefined)
  t.diagnostic(`removed ${Date.now() - destroyedAt} ms after Kasm destroyed it (GATEWAY_KASM_SYNC_S=1)`)
  assert.equal(await viewer.ended, 'end', 'the viewer got a clean end of stream')
  await until('presence cleared', async () => (await gw.app.presence.of(gone)).viewers === 0)
  await until(
    'the Kasm-lifecycle session removed too',
    async () => (await gw.app.sessions.get(ownId)) === undefined,
  )
  const again = await openSse(`${gw.url}/desktop/${gone}/mcp/events`, { authorization: `Bearer ${admin}` })
  assert.equal(again.status, 404)

  const records = (await call('GET', '/admin/audit?sub=system:kasm-sync')).body.records as AuditRecord[]
  assert.deepEqual(
    records.map((r) => [r.kasmId, r.route, r.action, r.reason]).sort(),
    [
      [gone, 'kasm/sync', 'remove', 'Kasm no longer has this session'],
      [ownId, 'kasm/sync', 'remove', 'Kasm no longer has this session'],
    ].sort(),
  )
  // Within one interval, counted in syncs rather than milliseconds (a loaded machine's syncs are slower): the
  // sync under way when Kasm destroyed it may have listed it still, the one after removes it.
  const removedBy = Number(records.find((r) => r.kasmId === gone)?.requestId.replace('kasm-sync-', ''))
  assert.ok(
    removedBy <= finishedBefore + 2,
    `removed by sync ${removedBy}, ${finishedBefore} had finished before`,
  )
  // The others stay: the live launched one, and the stale hand-registered one, flagged in the API and metrics.
  assert.ok(await gw.app.sessions.get(kept))
  const listed = (await call('GET', '/admin/sessions')).body.sessions as {
    kasmId: string
    staleSince?: string
  }[]
  assert.deepEqual(
    listed.map((s) => [s.kasmId, s.staleSince !== undefined]),
    [
      [kept, false],
      ['hand-1', true],
    ].sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
  )
  const one = await call('GET', '/admin/sessions/hand-1')
  assert.match(String(one.body.staleSince), /^\d{4}-\d\d-\d\dT/)
  assert.equal(await metric(gw.url, 'krg_kasm_stale_sessions'), 1)
  assert.equal(await metric(gw.url, 'krg_kasm_sessions_removed_total'), 2)
  // The hand-registered session still works.
  const operator = await bearer({ sub: 'op', roles: ['operator'], teams: ['blue'] })
  const write = await call('POST', '/desktop/hand-1/mcp/messages', {
    token: operator,
    body: { run: rt.run, key: 'k1', text: 'still here' },
  })
  assert.equal(write.status, 202)
})

test('with status upstreams, a session Kasm reports at a new address is moved there', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t, { env: { GATEWAY_KASM_SYNC_S: '1' } })
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  const kasmId = String(launched.body.kasmId)
  const session = [...kasm.sessions.values()][0]
  assert.ok(session)
  session.containerIp = '127.0.0.250'
  await until('moved', async () =>
    (await gw.app.sessions.get(kasmId))?.upstream.startsWith('http://127.0.0.250:'),
  )
  const moved = await gw.app.sessions.get(kasmId)
  assert.equal(moved?.version, 2, 'a new upstream is a new version: the reader reconnects')
  assert.equal(moved?.source, 'launch')
})

test("a removal by the sync carries the session's team: that team's admin sees why it vanished", async (t) => {
  const { kasm, gw, call } = await kasmSetup(t, { env: { GATEWAY_KASM_SYNC_S: '1' } })
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(launched.status, 201, launched.text)
  const kasmId = String(launched.body.kasmId)
  const session = [...kasm.sessions.values()][0]
  assert.ok(session)
  await kasm.destroy(session.id)
  await until('removed by the sync', async () => (await gw.app.sessions.get(kasmId)) === undefined)

  const blueAdmin = await bearer({ sub: 'bo', roles: ['admin'], teams: ['blue'] })
  const blue = (await call('GET', '/admin/audit?sub=system:kasm-sync', { token: blueAdmin })).body
    .records as AuditRecord[]
  assert.deepEqual(
    blue.map((r) => [r.kasmId, r.team, r.action, r.reason]),
    [[kasmId, 'blue', 'remove', 'Kasm no longer has this session']],
  )
  const redAdmin = await bearer({ sub: 'rudi', roles: ['admin'], teams: ['red'] })
  const red = (await call('GET', '/admin/audit?sub=system:kasm-sync', { token: redAdmin })).body
    .records as AuditRecord[]
  assert.deepEqual(red, [], "another team's admin does not see it")
})
