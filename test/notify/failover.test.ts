import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Cluster, leaseHolders, replyTo, request, startCluster } from '../cluster/cluster-harness.ts'
import { until } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { startReceiver } from './receiver.ts'

/**
 * Two real replicas on a real Redis, nobody viewing the session: the one reading it sends. Its owner is
 * SIGKILLed after the event, with its request on the wire (the receiver holds it unanswered): the replica that
 * takes the lease over finds the delivery claimed in Redis and does not send it again.
 */

const SECRET = 'webhook-secret-for-tests-0123456789'

/**
 * A receiver, two replicas notifying it (first retry after `retryMs`) and session k1 with no viewer: the
 * session has a route, so one replica reads it. Returns that one (`owner`) and the other.
 */
async function routedCluster(t: { after(fn: () => unknown): void }, retryMs: string) {
  const rx = await startReceiver(SECRET)
  t.after(() => rx.close())
  const c: Cluster = await startCluster(t, 2, {
    GATEWAY_NOTIFY_URL: rx.url,
    GATEWAY_NOTIFY_SECRET: SECRET,
    GATEWAY_NOTIFY_RETRY_MS: retryMs,
  })
  await c.addSession('k1')
  await until('one replica reads k1 unviewed', async () => (await leaseHolders(c.replicas)).length === 1)
  await until('the upstream stream is open', () => c.runtime.openEventStreams === 1)
  const [held] = await leaseHolders(c.replicas)
  const owner = c.replicas.find((r) => r.index === held)
  const survivor = c.replicas.find((r) => r.index !== held)
  assert.ok(owner && survivor)
  return { rx, c, owner, survivor }
}

test('two replicas, the owner SIGKILLed between the event and the answer to its send: delivered once', async (t) => {
  const { rx, c, owner, survivor } = await routedCluster(t, '50')
  rx.hang = true
  const q = c.runtime.ask({ title: 'Which export?', fields: [{ id: 'x', type: 'string', required: true }] })
  await until('the owner sent request.opened', () => rx.of('request.opened').length === 1)
  owner.child.kill('SIGKILL')
  await owner.exited
  rx.hang = false
  await until('the survivor reads', () => c.runtime.eventConnections >= 2 && c.runtime.openEventStreams === 1)

  const dan = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] }, { expiresIn: '1h' })
  const reply = await replyTo(survivor, dan, 'k1', {
    run: c.runtime.run,
    requestId: q.request_id,
    key: 'd1',
    values: { x: 'csv' },
  })
  assert.equal(reply.status, 202, reply.body)
  // The survivor's deliveries go out in order: its verdict on the opened one came before the closed one.
  await until('the survivor sent request.closed', () => rx.of('request.closed').length === 1)
  assert.equal(rx.of('request.opened').length, 1, `request.opened once:\n${c.logs()}`)
  assert.ok(rx.received.every((r) => r.signed))

  const admin = await request(`${survivor.url}/admin/notifications?kasmId=k1`, {
    headers: { authorization: `Bearer ${c.admin}` },
  })
  const { deliveries } = JSON.parse(admin.body) as { deliveries: { type: string; status: string }[] }
  assert.deepEqual(
    deliveries.map((d) => [d.type, d.status]),
    [
      ['request.closed', 'sent'],
      // The dead owner's record: it may have been received, so it is never sent again.
      ['request.opened', 'sending'],
    ],
  )
})

test('the owner SIGKILLed while its delivery waits to retry: the new owner resumes it, same delivery id', async (t) => {
  // A long backoff: the owner cannot retry before it dies.
  const { rx, c, owner, survivor } = await routedCluster(t, '600000')
  rx.script.push(503)
  c.runtime.ask({ title: 'Retry elsewhere', fields: [{ id: 'x', type: 'string' }] })
  const deliveries = async () => {
    const res = await request(`${survivor.url}/admin/notifications?kasmId=k1`, {
      headers: { authorization: `Bearer ${c.admin}` },
    })
    return (JSON.parse(res.body) as { deliveries: { status: string; attempts: number }[] }).deliveries
  }
  await until(
    'the failed attempt recorded in Redis',
    async () => (await deliveries())[0]?.status === 'retrying',
  )
  owner.child.kill('SIGKILL')
  await owner.exited
  await until('the survivor resumed it', () => rx.received.length === 2)
  const [first, second] = rx.received
  assert.equal(first?.answered, 503)
  assert.equal(second?.answered, 204)
  assert.equal(first?.headers['x-krg-delivery'], second?.headers['x-krg-delivery'])
  assert.equal(first?.raw, second?.raw, 'the same signed body')
  await until('recorded as sent after two attempts', async () => {
    const [d] = await deliveries()
    return d?.status === 'sent' && d.attempts === 2
  })
})
