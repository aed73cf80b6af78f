import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { bearer } from '../helpers/jwt.ts'
import { gatewayWithRuntime } from '../helpers/runtime-gateway.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

test('writes forwarded to a real runtime are audited with who sent what, never the text or token', async (t) => {
  const logs = captureLogs()
  const { gw, runtime } = await gatewayWithRuntime(t, {
    logger: logs.logger,
    runtime: { deliveryStepMs: 20 },
  })

  const bob = {
    authorization: `Bearer ${await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] })}`,
  }
  const text = 'please open the quarterly report'
  const sent = await fetch(`${gw.url}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { ...bob, 'content-type': 'application/json' },
    body: JSON.stringify({ run: runtime.run, key: 'msg-key-1', text }),
  })
  assert.equal(sent.status, 202, await sent.text())
  runtime.setLoop('running')
  const stopped = await fetch(`${gw.url}/desktop/k1/mcp/actions`, {
    method: 'POST',
    headers: { ...bob, 'content-type': 'application/json' },
    body: JSON.stringify({ run: runtime.run, key: 'act-key-1', action: 'stop' }),
  })
  const stopStatus = stopped.status
  await stopped.arrayBuffer()

  const records = await gw.app.audit.recent({ limit: 10, sub: 'bob' })
  const pick = (r: AuditRecord | undefined) =>
    r && [r.kasmId, r.route, r.key, r.action, r.outcome, r.status, r.upstreamStatus]
  assert.deepEqual(pick(records[1]), ['k1', 'messages', 'msg-key-1', undefined, 'forwarded', 202, 202])
  assert.deepEqual(pick(records[0]), [
    'k1',
    'actions',
    'act-key-1',
    'stop',
    'forwarded',
    stopStatus,
    stopStatus,
  ])

  const logged = logs.text()
  assert.ok(!logged.includes(text), 'the message text reached the logs')
  assert.ok(!logged.includes('tok-runtime-secret'), 'the messaging token reached the logs')
})
