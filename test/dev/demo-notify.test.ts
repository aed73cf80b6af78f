import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { request } from 'undici'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startDemoNotify } from '../../src/dev/demo-notify.ts'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { fastEnv, TOKEN } from '../overview/helpers.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

/** The demo's two-step notify file (issue 39): its second step reaches the demo's own receiver, logged readably. */

test('the demo notifies its team at once and its on-call step after after_s, both received and logged by the demo itself', async (t) => {
  const config = loadConfig(testEnv({ ...fastEnv }))
  const demo = await startDemoNotify(config, { onCallAfterS: 2 })
  assert.ok(demo !== null)
  t.after(() => demo.close())
  const file = demo.config.env.GATEWAY_NOTIFY_FILE as string
  const plan = JSON.parse(await readFile(file, 'utf8')) as { teams: Record<string, { after_s?: number }[]> }
  assert.deepEqual(
    plan.teams.red?.map((s) => s.after_s ?? 0),
    [0, 2],
  )

  const logs = captureLogs()
  const app = await buildApp(demo.config, { logger: logs.logger })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  demo.logTo(app.log)
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN, kasmId: 'demo-crm', deliveryStepMs: 20 })
  t.after(() => rt.close())
  await app.sessions.put({
    kasmId: 'demo-crm',
    upstream: rt.url,
    team: 'red',
    messagingToken: TOKEN,
    source: 'demo',
  })
  const q = rt.ask({
    title: 'Merge the two ACME contacts?',
    fields: [{ id: 'ok', type: 'boolean' }],
    deadlineS: 120,
  })

  const lines = () => logs.records().filter((r) => r.component === 'demo-webhook')
  const escalated = await waitFor('the on-call step received', () =>
    lines().find((r) => r.webhook === 'on-call' && r.type === 'request.opened'),
  )
  assert.equal(
    escalated.msg,
    'demo on-call (step 1, after 2 s): ESCALATED, nobody has taken the question in demo-crm yet: “Merge the two ACME contacts?”',
  )
  assert.equal(escalated.step, 1)
  const first = lines().findIndex((r) => r.webhook === 'team' && r.type === 'request.opened')
  const second = lines().findIndex((r) => r.webhook === 'on-call' && r.type === 'request.opened')
  assert.ok(first >= 0 && first < second, 'the team first, then on-call')
  assert.equal(
    lines()[first]?.msg,
    'demo team: a question is waiting in demo-crm: “Merge the two ACME contacts?”',
  )
  assert.ok(q.request_id)
  // Its receiver takes only what the gateway signed, at the two paths, by POST, within the size limit.
  const post = async (path: string, body: string, method = 'POST') => {
    const res = await request(`${demo.url}${path}`, { method, body: method === 'POST' ? body : undefined })
    await res.body.dump()
    return res.statusCode
  }
  assert.equal(await post('/on-call', '{"type":"request.opened"}'), 401, 'unsigned')
  assert.equal(await post('/on-call', '', 'GET'), 404)
  assert.equal(await post('/elsewhere', '{}'), 404)
  assert.equal(await post('/team', 'x'.repeat(70 * 1024)), 413)
})

test('the demo leaves notifications a person configured alone', async () => {
  const config = loadConfig(testEnv({ GATEWAY_NOTIFY_URL: 'https://hooks.example/x' }))
  assert.equal(await startDemoNotify(config), null)
})
