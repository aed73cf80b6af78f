import assert from 'node:assert/strict'
import { test } from 'node:test'
import { until } from '../events/helpers.ts'
import { kasmSetup } from './helpers.ts'

/** Issue 14: "Kasm down for a minute removes nothing", then the sync carries on where it left off. */

const metric = async (url: string, series: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return Number(line?.split(' ')[1] ?? 0)
}

test('Kasm unreachable, refusing and then answering an error page: nothing removed or unflagged, logged once, counted, retried once a second, then back to normal', async (t) => {
  const { kasm, gw, call, logs } = await kasmSetup(t, { env: { GATEWAY_KASM_SYNC_S: '1' } })
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(launched.status, 201)
  const kasmId = String(launched.body.kasmId)
  const hand = await call('PUT', '/admin/sessions/hand-1', {
    body: { upstream: 'http://127.0.0.1:9/', team: 'blue', messagingToken: 'hand-token-0123456789' },
  })
  assert.equal(hand.status, 201)
  await until('hand-1 flagged stale', async () => (await gw.app.kasm?.stale.all())?.has('hand-1'))
  const changes: string[] = []
  gw.app.sessions.onChange((id) => changes.push(id))
  const failedBefore = await metric(gw.url, 'krg_kasm_sync_runs_total{result="failed"}')
  const failedRuns = async () =>
    (await metric(gw.url, 'krg_kasm_sync_runs_total{result="failed"}')) - failedBefore

  // What the gateway does in an outage does not depend on its length, only on how many syncs fail: four
  // refusing connections, then four behind a proxy that answers its HTML error page.
  const started = Date.now()
  await kasm.setDown('refuse')
  await until('four refused syncs', async () => (await failedRuns()) >= 4)
  await kasm.setDown('html')
  await until('four more against the error page', async () => (await failedRuns()) >= 8)
  const failed = await failedRuns()
  const elapsed = Date.now() - started
  await kasm.setDown(null)
  // The backoff is capped at the interval (1 s), so eight failures are at least seven seconds apart in all:
  // Kasm is not hammered while it is away.
  assert.ok(elapsed >= (failed - 1) * 1000 - 50, `${failed} failed runs in ${elapsed} ms`)

  assert.deepEqual(changes, [], 'no session changed while Kasm was away')
  assert.deepEqual((await gw.app.sessions.list()).map((s) => s.kasmId).sort(), [kasmId, 'hand-1'].sort())
  assert.ok(
    (await gw.app.kasm?.stale.all())?.has('hand-1'),
    'the stale flag is kept, not recomputed from nothing',
  )
  const warnings = logs
    .records()
    .filter((r) => r.msg === 'Kasm sync failed; nothing changed, retrying with backoff')
  assert.equal(warnings.length, 1, 'logged once per outage')

  await until('the sync works again', () => logs.records().some((r) => r.msg === 'Kasm sync works again'))
  assert.ok(await gw.app.sessions.get(kasmId), 'Kasm still has it: kept')
  const session = [...kasm.sessions.values()][0]
  assert.ok(session)
  await kasm.destroy(session.id)
  await until(
    'removed once Kasm answers and no longer has it',
    async () => (await gw.app.sessions.get(kasmId)) === undefined,
  )
})
