import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startStack, until } from '../events/helpers.ts'
import { bearer } from '../helpers/jwt.ts'
import { type Receiver, startReceiver } from './receiver.ts'

/**
 * Attention routing in one gateway: a real receiver on port 0 checks every signature and counts what it got.
 * Each test ends on a later notification as a barrier, so "nothing more" is checked after everything before it
 * was delivered (deliveries to a target go out in order).
 */

const SECRET = 'webhook-secret-for-tests-0123456789'
const fastNotify = { GATEWAY_NOTIFY_SECRET: SECRET, GATEWAY_NOTIFY_RETRY_MS: '20' }

async function receiver(t: { after(fn: () => unknown): void }, secret = SECRET): Promise<Receiver> {
  const rx = await startReceiver(secret)
  t.after(() => rx.close())
  return rx
}

async function answer(url: string, token: string, run: string, requestId: string): Promise<void> {
  const res = await fetch(`${url}/desktop/s1/mcp/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      run,
      key: `k-${requestId}`,
      reply_to: requestId,
      revision: 1,
      values: { x: 'csv' },
    }),
  })
  assert.equal(res.status, 202, await res.text())
}

const FIELDS = [{ id: 'x', type: 'string', required: true }]

/** The `request` object of a body. */
function requestOf(body: Record<string, unknown> | undefined) {
  return body?.request as { request_id: string; deadline: string; closed_by?: string } | undefined
}

test('a question opened and answered: one request.opened, one request.closed, signed, without values', async (t) => {
  const rx = await receiver(t)
  const { rt, gw, token } = await startStack(t, { ...fastNotify, GATEWAY_NOTIFY_URL: rx.url })
  const q = rt.ask({ title: 'Which export?', fields: FIELDS, deadlineS: 300 })
  await until('request.opened', () => rx.of('request.opened').length === 1)
  await answer(gw.url, token, rt.run, q.request_id)
  await until('request.closed', () => rx.of('request.closed').length === 1)
  // A barrier: the handoff is notified after both; nothing else came before it.
  rt.escalate('the export needs a person')
  await until('escalation.started', () => rx.of('escalation.started').length === 1)
  assert.deepEqual(
    rx.received.map((r) => r.headers['x-krg-event']),
    ['request.opened', 'request.closed', 'escalation.started'],
  )
  for (const r of rx.received) {
    assert.ok(r.signed, 'X-Krg-Signature is the HMAC of the raw body')
    assert.equal(r.headers['content-type'], 'application/json')
    assert.equal(r.headers['x-krg-delivery'], r.body.delivery)
    assert.equal(r.body.type, r.headers['x-krg-event'])
    assert.equal(r.body.kasmId, 's1')
    assert.equal(r.body.team, 'blue')
    assert.equal(r.body.run, rt.run)
    // The console's deep link puts what the notification is about in view (src/console/links.ts).
    const focus =
      r.body.type === 'request.opened'
        ? `?run=${rt.run}&request=${q.request_id}`
        : r.body.type === 'escalation.started'
          ? '?handoff'
          : ''
    assert.equal(r.body.url, `http://gateway.test/sessions/s1${focus}`)
    assert.ok(!r.raw.includes('csv'), 'no field value')
    assert.ok(!r.raw.includes('messaging-token'), 'no token')
  }
  const [opened, closed, escalated] = rx.received.map((r) => r.body) as Record<string, unknown>[]
  assert.deepEqual(opened?.request, {
    request_id: q.request_id,
    title: 'Which export?',
    deadline: requestOf(opened)?.deadline,
    field_ids: ['x'],
  })
  assert.ok(Date.parse(requestOf(opened)?.deadline ?? '') > Date.now())
  assert.equal(requestOf(closed)?.closed_by, 'reply')
  assert.notEqual(opened?.delivery, closed?.delivery)
  assert.deepEqual(escalated?.escalation, { reason: 'the export needs a person' })

  // The admin API lists them, newest first, with their status.
  const admin = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const res = await fetch(`${gw.url}/admin/notifications`, { headers: { authorization: `Bearer ${admin}` } })
  assert.equal(res.status, 200)
  const { deliveries } = (await res.json()) as { deliveries: Record<string, unknown>[] }
  const host = `${new URL(rx.url).host}#0`
  assert.deepEqual(
    deliveries.map((d) => [d.type, d.status, d.attempts, d.target, d.httpStatus]),
    [
      ['escalation.started', 'sent', 1, host, 204],
      ['request.closed', 'sent', 1, host, 204],
      ['request.opened', 'sent', 1, host, 204],
    ],
  )
  // Scoped to the admin's teams: an admin of red sees none of blue's; a session of another team is unknown.
  const red = await bearer({ sub: 'rita', roles: ['admin'], teams: ['red'] })
  const scoped = await fetch(`${gw.url}/admin/notifications`, { headers: { authorization: `Bearer ${red}` } })
  assert.deepEqual(await scoped.json(), { deliveries: [] })
  const foreign = await fetch(`${gw.url}/admin/notifications?kasmId=s1`, {
    headers: { authorization: `Bearer ${red}` },
  })
  assert.equal(foreign.status, 404)
  const operator = await fetch(`${gw.url}/admin/notifications`, {
    headers: { authorization: `Bearer ${token}` },
  })
  assert.equal(operator.status, 403)

  const metrics = await (await fetch(`${gw.url}/metrics`)).text()
  assert.match(metrics, /krg_notifications_sent_total\{type="request.opened",target="127.0.0.1:\d+#0"\} 1/)
  assert.ok(!/krg_notifications_[a-z_]+\{[^}]*s1/.test(metrics), 'no session id in a label')
})

test('a receiver failing twice with 503: the same delivery three times, then nothing more', async (t) => {
  const rx = await receiver(t)
  rx.script.push(503, 503)
  const { rt, gw } = await startStack(t, { ...fastNotify, GATEWAY_NOTIFY_URL: rx.url })
  rt.ask({ title: 'Retry me', fields: FIELDS })
  await until('three attempts', () => rx.received.length === 3)
  assert.deepEqual(
    rx.received.map((r) => r.answered),
    [503, 503, 204],
  )
  const ids = new Set(rx.received.map((r) => r.headers['x-krg-delivery']))
  assert.equal(ids.size, 1, 'one delivery id on every retry')
  assert.equal(new Set(rx.received.map((r) => r.raw)).size, 1, 'the same signed body every time')
  rt.escalate('barrier')
  await until('the next notification', () => rx.of('escalation.started').length === 1)
  assert.equal(rx.of('request.opened').length, 3, 'nothing more after the success')
  const metrics = await (await fetch(`${gw.url}/metrics`)).text()
  assert.match(metrics, /krg_notifications_retried_total\{type="request.opened",target="[^"]+"\} 2/)
  assert.match(metrics, /krg_notifications_sent_total\{type="request.opened",target="[^"]+"\} 1/)
})

test('a 4xx is given up at once; a target timing out is retried within its window, then given up', async (t) => {
  const rx = await receiver(t)
  rx.script.push(410)
  const { rt, gw } = await startStack(t, {
    ...fastNotify,
    GATEWAY_NOTIFY_URL: rx.url,
    GATEWAY_NOTIFY_TIMEOUT_MS: '200',
    // Three seconds: a retry must start within the window, and on a loaded machine the first 200 ms timeout
    // alone has fired most of a second late.
    GATEWAY_NOTIFY_RETRY_FOR_S: '3',
    GATEWAY_NOTIFY_RETRY_MS: '100',
  })
  rt.ask({ title: 'Gone', fields: FIELDS })
  await until('the refused attempt', () => rx.received.length === 1)
  const admin = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const list = async () =>
    (
      (await (
        await fetch(`${gw.url}/admin/notifications`, { headers: { authorization: `Bearer ${admin}` } })
      ).json()) as {
        deliveries: { type: string; status: string; attempts: number; error: string | null }[]
      }
    ).deliveries
  await until('given up after a 410', async () => (await list())[0]?.status === 'failed')
  assert.deepEqual((await list())[0], { ...(await list())[0], attempts: 1, error: 'http_410' })

  rx.hang = true
  rt.escalate('nobody answers')
  await until('given up after timeouts', async () => (await list())[0]?.status === 'failed')
  const [escalated] = await list()
  assert.equal(escalated?.type, 'escalation.started')
  assert.equal(escalated?.error, 'timeout')
  assert.ok((escalated?.attempts ?? 0) >= 2, `retried within the window (${escalated?.attempts} attempts)`)
  assert.equal(rx.of('escalation.started').length, escalated?.attempts)
})

test("a team's route in the notify file wins over the global URL; slack bodies have text and blocks", async (t) => {
  const global = await receiver(t)
  const team = await receiver(t, 'a-team-secret-of-sixteen+')
  const file = join(tmpdir(), `notify-${process.pid}-${Date.now()}.yaml`)
  await writeFile(
    file,
    `teams:\n  blue:\n    - url: ${team.url}\n      format: slack\n      secret: a-team-secret-of-sixteen+\n`,
  )
  const { rt } = await startStack(t, {
    ...fastNotify,
    GATEWAY_NOTIFY_URL: global.url,
    GATEWAY_NOTIFY_FILE: file,
  })
  rt.ask({ title: 'Export <all> & more?', fields: FIELDS, deadlineS: 300 })
  await until('the team route', () => team.received.length === 1)
  rt.escalate('barrier')
  await until('the barrier', () => team.received.length === 2)
  assert.equal(global.received.length, 0, 'the global URL got nothing for team blue')
  const [slack] = team.received
  assert.ok(slack?.signed, 'signed with the entry secret')
  const body = slack?.body as {
    text: string
    blocks: { type: string; text?: { type: string; text: string } }[]
  }
  assert.deepEqual(Object.keys(body).sort(), ['blocks', 'text'])
  assert.match(body.text, /A question is waiting.*session s1 \(team blue\)/)
  assert.match(body.text, /Export &lt;all&gt; &amp; more\?/, 'mrkdwn control characters escaped')
  assert.match(
    body.text,
    /<http:\/\/gateway\.test\/sessions\/s1\?run=[^&|]+&request=q\d+\|/,
    'a link to the question of its run',
  )
  assert.equal(body.blocks[0]?.type, 'section')
  assert.equal(body.blocks[0]?.text?.type, 'mrkdwn')
  assert.equal(body.blocks[1]?.type, 'actions')
})

test('a question still open at half its deadline: request.opened again with reminder: true, once', async (t) => {
  const rx = await receiver(t)
  const { rt } = await startStack(t, { ...fastNotify, GATEWAY_NOTIFY_URL: rx.url })
  const q = rt.ask({ title: 'Soon', fields: FIELDS, deadlineS: 4 })
  await until('the reminder', () => rx.of('request.opened').length === 2)
  const [first, again] = rx.of('request.opened')
  assert.equal(first?.body.reminder, undefined)
  assert.equal(again?.body.reminder, true)
  assert.notEqual(first?.body.delivery, again?.body.delivery)
  assert.equal(requestOf(again?.body)?.request_id, q.request_id)
  // The runtime times the question out at its deadline: closed, and no second reminder before it.
  await until('closed by timeout', () => rx.of('request.closed').length === 1)
  assert.equal(requestOf(rx.of('request.closed')[0]?.body)?.closed_by, 'timeout')
  assert.equal(rx.of('request.opened').length, 2)
})

test('a handoff started and ended; a run ended with test-error is notified, one that passed is not', async (t) => {
  const rx = await receiver(t)
  const { rt } = await startStack(t, { ...fastNotify, GATEWAY_NOTIFY_URL: rx.url })
  rt.escalate('captcha')
  await until('escalation.started', () => rx.of('escalation.started').length === 1)
  rt.emit('escalation', { reason: 'captcha', ended_by: 'operator', paused_s: 12 })
  await until('escalation.ended', () => rx.of('escalation.ended').length === 1)
  assert.deepEqual(rx.of('escalation.ended')[0]?.body.escalation, { reason: 'captcha', ended_by: 'operator' })
  const passed = rt.run
  rt.emit('status', { phase: 'done', verdict: 'pass', outcome: 'passed' })
  rt.closeTrace({ done: true })
  rt.newRun()
  rt.ask({ title: 'Barrier', fields: FIELDS })
  await until('the next run’s question', () => rx.of('request.opened').length === 1)
  rt.emit('status', { phase: 'done', verdict: 'test-error', outcome: 'failed' })
  rt.closeTrace({ done: true })
  await until('run.ended', () => rx.of('run.ended').length === 1)
  const ended = rx.of('run.ended')[0]?.body
  assert.equal(ended?.verdict, 'test-error')
  assert.equal(ended?.outcome, 'failed')
  assert.notEqual(ended?.run, passed)
  // The question closed with its run: the thread can be marked done. Its notification may arrive after run.ended's.
  await until('request.closed', () => rx.of('request.closed').length === 1)
  assert.equal(requestOf(rx.of('request.closed')[0]?.body)?.closed_by, 'run_ended')
  assert.ok(rx.received.every((r) => r.body.run !== passed || r.headers['x-krg-event'] !== 'run.ended'))
})
