import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { leaseHolders, replyTo, startCluster } from '../cluster/cluster-harness.ts'
import { until } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { startReceiver } from '../notify/receiver.ts'

/**
 * Two real replicas on a real Redis, one question with three steps (0 s, 2 s, 5 s), nobody viewing the
 * session: the replica reading it sends steps 0 and 1, each once; it is SIGKILLed between steps 1 and 2; the
 * replica that takes the lease over follows the plan in the board record and sends step 2, once.
 */
test('two replicas send each step once; the reader killed between two steps: the next step once', async (t) => {
  const rx = await startReceiver()
  t.after(() => rx.close())
  const base = rx.url.replace(/\/hook$/, '')
  const dir = await mkdtemp(join(tmpdir(), 'krg-escalation-'))
  const file = join(dir, 'notify.json')
  await writeFile(
    file,
    JSON.stringify({
      teams: {
        blue: [{ url: `${base}/hook` }, { url: `${base}/s1`, after_s: 2 }, { url: `${base}/s2`, after_s: 5 }],
      },
    }),
  )
  const c = await startCluster(t, 2, { GATEWAY_NOTIFY_FILE: file, GATEWAY_NOTIFY_RETRY_MS: '50' })
  await c.addSession('k1')
  await until('one replica reads k1 unviewed', async () => (await leaseHolders(c.replicas)).length === 1)
  await until('the upstream stream is open', () => c.runtime.openEventStreams === 1)
  const [held] = await leaseHolders(c.replicas)
  const owner = c.replicas.find((r) => r.index === held)
  const survivor = c.replicas.find((r) => r.index !== held)
  assert.ok(owner && survivor)

  const opened = (path: string) =>
    rx.received.filter((r) => r.path === path && r.headers['x-krg-event'] === 'request.opened')
  const q = c.runtime.ask({ title: 'Who takes it?', fields: [{ id: 'x', type: 'string' }], deadlineS: 300 })
  await until('step 0', () => opened('/hook').length === 1)
  await until('step 1', () => opened('/s1').length === 1)
  owner.child.kill('SIGKILL')
  await owner.exited
  await until('step 2, from the survivor', () => opened('/s2').length === 1)
  assert.equal(opened('/s2')[0]?.body.step, 2)

  const dan = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
  const reply = await replyTo(survivor, dan, 'k1', {
    run: c.runtime.run,
    requestId: q.request_id,
    key: 'd1',
    values: { x: 'csv' },
  })
  assert.equal(reply.status, 202, reply.body)
  // The closings are the barrier: each target got its opening before (deliveries to a target keep order).
  for (const path of ['/hook', '/s1', '/s2'])
    await until(`${path} closed`, () =>
      rx.received.some((r) => r.path === path && r.headers['x-krg-event'] === 'request.closed'),
    )
  for (const path of ['/hook', '/s1', '/s2'])
    assert.equal(opened(path).length, 1, `${path} once:\n${c.logs().slice(-4000)}`)
  assert.deepEqual(
    opened('/hook')
      .concat(opened('/s1'), opened('/s2'))
      .map((r) => r.body.step),
    [0, 1, 2],
  )
})
