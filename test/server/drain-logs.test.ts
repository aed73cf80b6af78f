import assert from 'node:assert/strict'
import { test } from 'node:test'
import { logRecords, startCluster } from '../cluster/cluster-harness.ts'
import { openSse, type SseClient } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * What a replica logs while it drains (SIGTERM, cluster mode, real child process): the 503 `shutting_down`
 * answers it gives new viewers meanwhile are expected, so they are logged at info without a stack trace, and
 * closing its own Redis connections is no outage.
 */
test('a draining replica logs its 503 shutting_down answers at info, without a stack, and no outage', async (t) => {
  // The loop below asks as fast as it can for as long as the drain lasts: past the default per-operator budget
  // on a slow machine, which would answer 429 instead of the drain's 503.
  const c = await startCluster(t, 1, { LOG_LEVEL: 'info', GATEWAY_RATE_LIMIT_MAX: '1000000' })
  await c.addSession('k')
  const replica = c.replicas[0]
  assert.ok(replica)
  const auth = {
    authorization: `Bearer ${await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })}`,
  }
  // Enough viewers that ending them is spread over a window in which new ones are refused.
  const viewers = await Promise.all(
    Array.from({ length: 20 }, () => openSse(`${replica.url}/desktop/k/mcp/events`, auth)),
  )
  t.after(() => {
    for (const v of viewers) v.close()
  })
  assert.ok(viewers.every((v) => v.status === 200))
  const mark = replica.output.length
  replica.child.kill('SIGTERM')
  // The signal arrives when it arrives: a viewer that came first is served. From the drain's first line on,
  // new viewers are refused.
  await waitFor('the drain began', () =>
    replica.output.slice(mark).some((line) => line.includes('shutting down: draining streams')),
  )
  const refused: unknown[] = []
  // Until the replica stops listening: every answer meanwhile is the drain's refusal.
  for (;;) {
    const late: SseClient | null = await openSse(`${replica.url}/desktop/k/mcp/events`, auth).catch(
      () => null,
    )
    if (late === null) break
    assert.equal(late.status, 503)
    refused.push(late.body)
  }
  assert.equal((await replica.exited).code, 0)
  assert.ok(
    refused.some((b) => (b as { error?: string }).error === 'shutting_down'),
    `refused with shutting_down: ${JSON.stringify(refused)}`,
  )
  const records = logRecords(replica, mark)
  const answers = records.filter((r) => r.code === 'shutting_down')
  assert.ok(answers.length > 0, 'each refusal is logged')
  for (const r of answers) assert.equal(r.level, 30, `at info: ${JSON.stringify(r)}`)
  const loud = records.filter((r) => Number(r.level) >= 40)
  assert.deepEqual(loud, [], 'nothing of a normal drain is a warning or an error')
  assert.ok(!records.some((r) => JSON.stringify(r).includes('"stack"')), 'no stack trace')
})
