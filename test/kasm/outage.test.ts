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

test('Kasm unreachable for a minute: nothing removed or unflagged, logged once, counted, then back to normal', async (t) => {
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

  // Half the minute refusing connections, half behind a proxy that answers its HTML error page.
  const started = Date.now()
  await kasm.setDown('refuse')
  await until('half a minute passed', () => Date.now() - started >= 30_000, 40_000)
  await kasm.setDown('html')
  await until('a minute passed', () => Date.now() - started >= 60_000, 40_000)
  const failed = (await metric(gw.url, 'krg_kasm_sync_runs_total{result="failed"}')) - failedBefore
  await kasm.setDown(null)

  assert.deepEqual(changes, [], 'no session changed while Kasm was away')
  assert.deepEqual((await gw.app.sessions.list()).map((s) => s.kasmId).sort(), [kasmId, 'hand-1'].sort())
  assert.ok(
    (await gw.app.kasm?.stale.all())?.has('hand-1'),
    'the stale flag is kept, not recomputed from nothing',
  )
  // Retried with backoff capped at the interval: about one attempt a second, every one counted.
  assert.ok(failed >= 20 && failed <= 70, `failed runs counted: ${failed}`)
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
