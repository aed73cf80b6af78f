import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startStack, until } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { startReceiver } from './receiver.ts'

/** Webhook targets are told apart by their place in the list, never by their host alone nor by their path. */

const SECRET = 'webhook-secret-for-tests-0123456789'
const FIELDS = [{ id: 'x', type: 'string', required: true }]

test('two webhook URLs on one host (two Slack channels) both get every notification', async (t) => {
  const rx = await startReceiver(SECRET)
  t.after(() => rx.close())
  const origin = new URL(rx.url).origin
  const host = new URL(rx.url).host
  const { rt, gw } = await startStack(t, {
    GATEWAY_NOTIFY_SECRET: SECRET,
    GATEWAY_NOTIFY_RETRY_MS: '20',
    GATEWAY_NOTIFY_URL: `${origin}/services/T1/B1/secret-one,${origin}/services/T1/B2/secret-two`,
  })
  rt.ask({ title: 'Which export?', fields: FIELDS })
  await until('request.opened at both URLs', () => rx.of('request.opened').length === 2)
  rt.escalate('a person, please')
  await until('escalation.started at both URLs', () => rx.of('escalation.started').length === 2)
  for (const path of ['/services/T1/B1/secret-one', '/services/T1/B2/secret-two'])
    assert.deepEqual(
      rx.received.filter((r) => r.path === path).map((r) => r.headers['x-krg-event']),
      ['request.opened', 'escalation.started'],
      path,
    )
  assert.ok(rx.received.every((r) => r.signed))
  const ids = rx.received.map((r) => r.headers['x-krg-delivery'])
  assert.equal(new Set(ids).size, 4, 'one delivery id per notification and target')

  // Two ledger claims per notification, one per target, each labelled by its place in the list.
  const admin = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const res = await fetch(`${gw.url}/admin/notifications`, { headers: { authorization: `Bearer ${admin}` } })
  const { deliveries } = (await res.json()) as {
    deliveries: { type: string; target: string; status: string }[]
  }
  assert.deepEqual(deliveries.map((d) => `${d.type} ${d.target} ${d.status}`).sort(), [
    `escalation.started ${host}#0 sent`,
    `escalation.started ${host}#1 sent`,
    `request.opened ${host}#0 sent`,
    `request.opened ${host}#1 sent`,
  ])

  // Distinct metric series, and no URL path (a Slack webhook's path is its key) in any label.
  const metrics = await (await fetch(`${gw.url}/metrics`)).text()
  for (const index of [0, 1])
    assert.match(
      metrics,
      new RegExp(`krg_notifications_sent_total\\{type="request.opened",target="${host}#${index}"\\} 1`),
    )
  assert.doesNotMatch(metrics, /secret-one|secret-two|services/)
})
