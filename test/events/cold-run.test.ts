import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { openSse, type SseClient, startStack, until } from './helpers.ts'

/**
 * A stream that asks for the current position (`after=<current seq>&run=<current run>`) has nothing to replay,
 * and the runtime opens it with `: run <id>` at once. So must the gateway, whether the session is already read
 * (warm) or the viewer is its first (cold: the run is known once the reader's first batch is in), with either
 * broker.
 */

/** The comments of a stream other than its heartbeats. */
function runLines(client: SseClient): string[] {
  return client.comments.filter((c) => c.trim() !== 'ping')
}

async function opensWithRun(t: TestContext, env: Record<string, string>): Promise<void> {
  const { rt, token, eventsUrl, gw } = await startStack(t, env)
  const auth = { authorization: `Bearer ${token}` }
  const run = rt.run
  let seq = 0
  for (let i = 0; i < 3; i++) seq = rt.emit('step', { n: i }).seq
  assert.equal(gw.app.events.streams.reader('s1'), null, 'cold: nothing reads the session yet')
  const at = `${eventsUrl}?after=${seq}&run=${encodeURIComponent(run)}`

  const cold = await openSse(at, auth)
  t.after(() => cold.close())
  assert.equal(cold.status, 200)
  await until('the cold stream names its run', () => runLines(cold).length > 0)
  assert.deepEqual(runLines(cold), [`run ${run}`])
  assert.equal(cold.events.length, 0, 'before any event')

  // Warm: the session is read now; a second viewer at the same place gets its run line at once too.
  const warm = await openSse(at, auth)
  t.after(() => warm.close())
  await until('the warm stream names its run', () => runLines(warm).length > 0)
  assert.deepEqual(runLines(warm), [`run ${run}`])
  assert.equal(warm.events.length, 0)

  // Then live, once each, after the one run line.
  const next = rt.emit('step', { n: 'live' }).seq
  for (const client of [cold, warm]) {
    await until('the live event', () => client.events.length === 1)
    assert.deepEqual(client.ids(), [`${run}:${next}`])
    assert.ok(client.text().startsWith(`: run ${run}\nid: ${run}:${next}\n`), client.text())
  }
  assert.equal(rt.eventConnections, 1)
}

test('a cold stream at the current position opens with its run line (memory broker)', async (t) => {
  await opensWithRun(t, {})
})

test('a cold stream at the current position opens with its run line (Redis broker)', async (t) => {
  await opensWithRun(t, sharedRedisEnv(t))
})
