import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { SimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { dedupKey } from '../../src/escalation/pagerduty.ts'
import { type EscalationState, escalationField, parseEscalationState } from '../../src/escalation/state.ts'
import type { Notification } from '../../src/notify/notification.ts'
import { addRuntimeSession, fastEventEnv } from '../events/helpers.ts'
import {
  BOT_TOKEN,
  SIGNING_SECRET,
  type SlackStandIn,
  startSlackStandIn,
  WORKSPACE,
} from '../fixtures/slack-api.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { type Received, type Receiver, startReceiver } from '../notify/receiver.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('escalation steps', () => {
  /**
   * Escalation steps in one gateway, shared by the file's tests (each asks its own question): team blue's notify
   * file has a webhook without `after_s` (`/hook`), step 1 at 2 s (a webhook `/step1` and a person with no
   * linked account) and step 2 at 4 s (a pager `/pd` and Olivia, linked to a Slack user of the stand-in).
   * Claims lapse after 4 s (a claim taken at once holds step 1 with room to spare on a loaded machine). Every wait is for a delivery or a record; time passing is never the proof.
   */

  const ROUTING_KEY = 'pd-routing-key-0123456789abcdef'
  const OLIVIA_SLACK = 'U0OLIVIA1'
  const FIELDS = [{ id: 'x', type: 'string', required: true }]

  let rx: Receiver
  let slack: SlackStandIn
  let gw: TestGateway
  let rt: SimulatedRuntime
  let file: string
  let base: string
  let closeRuntime: () => Promise<void> = async () => {}

  function plan(): Record<string, unknown> {
    return {
      teams: {
        blue: [
          { url: `${base}/hook` },
          { url: `${base}/step1`, after_s: 2 },
          { person: 'nobody', after_s: 2 },
          { pagerduty: { routingKeyFile: 'pd-key', url: `${base}/pd` }, after_s: 4 },
          { person: 'olivia', after_s: 4 },
        ],
      },
    }
  }

  before(async () => {
    rx = await startReceiver()
    base = rx.url.replace(/\/hook$/, '')
    slack = await startSlackStandIn()
    const dir = await mkdtemp(join(tmpdir(), 'krg-escalation-'))
    file = join(dir, 'notify.json')
    await writeFile(join(dir, 'pd-key'), `${ROUTING_KEY}\n`)
    await writeFile(file, JSON.stringify(plan()))
    gw = await startGateway({
      ...fastEventEnv,
      GATEWAY_NOTIFY_FILE: file,
      GATEWAY_NOTIFY_RETRY_MS: '20',
      GATEWAY_CLAIM_TTL_S: '4',
      GATEWAY_SLACK_BOT_TOKEN: BOT_TOKEN,
      GATEWAY_SLACK_SIGNING_SECRET: SIGNING_SECRET,
      GATEWAY_SLACK_API_URL: slack.apiUrl,
      ...(process.env.ESC_DEBUG ? { LOG_LEVEL: 'debug' } : {}),
    })
    await gw.app.people.links?.link(
      { chat: 'slack', workspace: WORKSPACE.id, user: OLIVIA_SLACK },
      { sub: 'olivia', name: 'Olivia', roles: ['operator'], teams: ['blue'] },
    )
    // The file's runtime, closed with the file (below).
    const closers: (() => unknown)[] = []
    const scope = { after: (fn: () => unknown) => closers.push(fn) }
    rt = await addRuntimeSession(scope as unknown as Parameters<typeof addRuntimeSession>[0], gw.app)
    closeRuntime = async () => {
      for (const fn of closers) await fn()
    }
  })

  after(async () => {
    await closeRuntime()
    await gw?.close()
    await rx?.close()
    await slack?.close()
  })

  /** What the webhook at `path` received about the question `id`, of `type`. */
  function about(path: string, type: string, id: string): Received[] {
    return rx.received.filter(
      (r) =>
        r.path === path &&
        r.headers['x-krg-event'] === type &&
        (r.body.request as { request_id?: string } | undefined)?.request_id === id,
    )
  }

  /** The pager's events about the question `id` (those with its dedup_key, whatever came first), in order. */
  function pagerEvents(id: string): string[] {
    const key = dedupKey({ kasmId: 's1', run: rt.run, request: { request_id: id } } as Notification)
    return rx.received
      .filter((r) => r.path === '/pd' && r.body.dedup_key === key)
      .map((r) => String(r.body.event_action))
  }

  async function record(id: string): Promise<EscalationState | null> {
    const value = (await gw.app.board.read('s1')).get(escalationField(rt.run, id))
    return value === undefined ? null : parseEscalationState(value)
  }

  async function answer(id: string): Promise<void> {
    const res = await fetch(`${gw.url}/desktop/s1/mcp/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await bearer()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ run: rt.run, key: `k-${id}`, reply_to: id, revision: 1, values: { x: 'csv' } }),
    })
    assert.equal(res.status, 202, await res.text())
  }

  async function claim(id: string, sub: string, method: 'PUT' | 'DELETE'): Promise<void> {
    const token = await bearer({ sub, name: sub, roles: ['operator'], teams: ['blue'] })
    const res = await fetch(
      `${gw.url}/api/sessions/s1/requests/${id}/claim?run=${encodeURIComponent(rt.run)}`,
      {
        method,
        headers: { authorization: `Bearer ${token}` },
      },
    )
    assert.ok(res.status === 200 || res.status === 204, `${method} claim: ${res.status} ${await res.text()}`)
  }

  /** The value of a counter's series with these labels (0 when absent). */
  async function counter(name: string, labels: Record<string, string>): Promise<number> {
    const metric = await gw.app.metrics.registry.getSingleMetric(name)?.get()
    const match = metric?.values.find((v) =>
      Object.entries(labels).every(([k, want]) => v.labels[k] === want),
    )
    return match?.value ?? 0
  }

  const index = (r: Received | undefined): number => (r === undefined ? -1 : rx.received.indexOf(r))

  test('steps go out in order while unclaimed; a claim acknowledges the paged pager; an answer resolves it with the same dedup_key', async () => {
    const skippedBefore = await counter('krg_escalation_steps_total', {
      team: 'blue',
      kind: 'person',
      outcome: 'skipped',
      reason: 'no_linked_account',
    })
    const q = rt.ask({ title: 'Which export?', fields: FIELDS, deadlineS: 300 })
    const id = q.request_id
    await waitFor('step 0', () => about('/hook', 'request.opened', id).length === 1)
    await waitFor('step 1', () => about('/step1', 'request.opened', id).length === 1)
    await waitFor('step 2: the pager', () => pagerEvents(id).length === 1)
    await waitFor('step 2: Olivia gets a direct message', () =>
      slack
        .of('chat.postMessage')
        .some((c) => c.args.channel === OLIVIA_SLACK && JSON.stringify(c.args).includes('Which export?')),
    )
    const [s0] = about('/hook', 'request.opened', id)
    const [s1] = about('/step1', 'request.opened', id)
    const trigger = rx.received.find((r) => r.path === '/pd')
    assert.ok(index(s0) < index(s1) && index(s1) < index(trigger), 'in order')
    assert.equal(s0?.body.step, 0)
    assert.equal(s1?.body.step, 1)

    // The pager's trigger: Events API v2, the routing key from its file, a summary without values.
    assert.equal(trigger?.body.routing_key, ROUTING_KEY)
    assert.equal(trigger?.body.event_action, 'trigger')
    assert.match(String(trigger?.body.dedup_key), /^krg-[A-Za-z0-9_-]{32}$/)
    assert.ok(!String(trigger?.body.dedup_key).includes(id), 'the dedup_key names no id')
    const payload = trigger?.body.payload as Record<string, unknown>
    assert.match(String(payload.summary), /Which export\?/)
    assert.equal(payload.severity, 'error')
    assert.deepEqual(trigger?.body.links, [
      { href: `http://gateway.test/sessions/s1?run=${rt.run}&request=${id}`, text: 'Open in the console' },
    ])

    // The person without a linked account: skipped, counted, never an error; the record says so.
    const rec = await waitFor('the record of step 2', async () => {
      const r = await record(id)
      return r?.steps[2]?.state === 'sent' ? r : null
    })
    assert.deepEqual(
      rec.steps.map((s) => [s.step, s.afterS, s.state]),
      [
        [0, 0, 'sent'],
        [1, 2, 'sent'],
        [2, 4, 'sent'],
      ],
    )
    assert.deepEqual(rec.steps[1]?.targets, [
      { kind: 'webhook', label: 'team:blue#1', outcome: 'sent' },
      { kind: 'person', label: 'person:nobody', outcome: 'skipped', reason: 'no_linked_account' },
    ])
    assert.deepEqual(
      rec.steps[2]?.targets.map((t) => [t.kind, t.outcome]),
      [
        ['pagerduty', 'sent'],
        ['person', 'sent'],
      ],
    )
    assert.equal(rec.next, null)
    assert.equal(
      await counter('krg_escalation_steps_total', {
        team: 'blue',
        kind: 'person',
        outcome: 'skipped',
        reason: 'no_linked_account',
      }),
      skippedBefore + 1,
    )

    // "I'm on it" after the pager's step: the pager already triggered is acknowledged, same incident.
    await claim(id, 'dan', 'PUT')
    await waitFor('the pager acknowledged', () => pagerEvents(id).join() === 'trigger,acknowledge')
    const ack = rx.received.filter((r) => r.path === '/pd').at(-1)
    assert.equal(ack?.body.dedup_key, trigger?.body.dedup_key, 'the same dedup_key')
    assert.equal(ack?.body.routing_key, ROUTING_KEY)
    assert.deepEqual(Object.keys(ack?.body ?? {}).sort(), ['dedup_key', 'event_action', 'routing_key'])

    await answer(id)
    await waitFor('the pager resolved', () => pagerEvents(id).at(-1) === 'resolve')
    // (A claim lapsing first, on a very slow machine, would trigger again in between: not this test's point.)
    assert.deepEqual(pagerEvents(id).slice(0, 2), ['trigger', 'acknowledge'])
    const resolve = rx.received.filter((r) => r.path === '/pd').at(-1)
    assert.equal(resolve?.body.dedup_key, trigger?.body.dedup_key, 'the same dedup_key')
    assert.deepEqual(Object.keys(resolve?.body ?? {}).sort(), ['dedup_key', 'event_action', 'routing_key'])
    await waitFor('closings to the webhooks', () =>
      ['/hook', '/step1'].every((p) => about(p, 'request.closed', id).length === 1),
    )
  })

  test('a claim stops the steps (the pager not yet paged hears nothing of it); it lapses (the holder told, the record says whose) and they resume', async () => {
    const lapsedBefore = await counter('krg_claims_total', { team: 'blue', outcome: 'lapsed' })
    const q = rt.ask({ title: 'Take me', fields: FIELDS, deadlineS: 300 })
    const id = q.request_id
    await waitFor('step 0', () => about('/hook', 'request.opened', id).length === 1)
    await claim(id, 'olivia', 'PUT')
    const claimed = await waitFor(
      'request.claimed to the notified target',
      () => about('/hook', 'request.claimed', id)[0],
    )
    assert.equal((claimed.body.claim as { sub: string }).sub, 'olivia')

    // Step 1 was due at 2 s; the claim holds it until it lapses (4 s after it was taken), then it goes out.
    const unclaimed = await waitFor('the claim lapsed', () => about('/hook', 'request.unclaimed', id)[0])
    assert.deepEqual((unclaimed.body.unclaimed as { reason: string }).reason, 'lapsed')
    const s1 = await waitFor('step 1 after the lapse', () => about('/step1', 'request.opened', id)[0])
    assert.ok(index(claimed) < index(unclaimed) && index(unclaimed) < index(s1), 'step 1 only once unclaimed')
    assert.equal(about('/step1', 'request.claimed', id).length, 0, 'the claim went to notified targets only')
    // The holder is told: a direct message through her linked Slack account.
    await waitFor('the holder told', async () =>
      (await gw.app.notifications?.ledger.recent({ limit: 200, kasmId: 's1' }))?.some(
        (d) => d.target === 'person:olivia/slack' && d.type === 'request.unclaimed',
      ),
    )
    assert.equal(await counter('krg_claims_total', { team: 'blue', outcome: 'lapsed' }), lapsedBefore + 1)

    // The record says whose claim lapsed, when it was taken and when it lapsed (the console tells the holder).
    const claimAt = (claimed.body.claim as { at: string }).at
    const lapsed = await waitFor('the lapse in the record', async () => (await record(id))?.lapsed)
    assert.equal(lapsed.sub, 'olivia')
    assert.equal(lapsed.name, 'olivia')
    assert.equal(lapsed.claimedAt, claimAt)
    assert.ok(
      Date.parse(lapsed.at) >= Date.parse(claimAt) + 4000,
      `lapsed at ${lapsed.at}, taken at ${claimAt}`,
    )
    // Someone else taking it (and giving it back) leaves her lapse; her taking it again ends it.
    await claim(id, 'dan', 'PUT')
    await waitFor('dan holds it', () =>
      about('/hook', 'request.claimed', id).some((r) => (r.body.claim as { sub: string }).sub === 'dan'),
    )
    await claim(id, 'dan', 'DELETE')
    await waitFor('dan gave it back', () =>
      about('/hook', 'request.unclaimed', id).some(
        (r) => (r.body.unclaimed as { holder: { sub: string } }).holder.sub === 'dan',
      ),
    )
    assert.deepEqual((await record(id))?.lapsed, lapsed)
    await claim(id, 'olivia', 'PUT')
    await waitFor('her lapse is over', async () => (await record(id))?.lapsed === null)

    await answer(id)
    await waitFor('closed', () => about('/step1', 'request.closed', id).length === 1)
    await waitFor('the pager resolved', () => pagerEvents(id).at(-1) === 'resolve')
    // Olivia's first claim came before the pager's step: the pager heard nothing of it (its first event is
    // the trigger); the later claims, after it was paged, acknowledge it.
    assert.equal(pagerEvents(id)[0], 'trigger')
    assert.ok(pagerEvents(id).includes('acknowledge'))
  })

  test('a claim given back before it lapses: the steps whose time has passed go out at once', async () => {
    const releasedBefore = await counter('krg_claims_total', { team: 'blue', outcome: 'released' })
    const id = rt.ask({ title: 'Give it back', fields: FIELDS, deadlineS: 300 }).request_id
    await waitFor('step 0', () => about('/hook', 'request.opened', id).length === 1)
    await claim(id, 'dan', 'PUT')
    await waitFor('request.claimed', () => about('/hook', 'request.claimed', id).length === 1)
    const held = await record(id)
    assert.equal(held?.next, null, 'nothing is next while held')
    // Held past step 1's time (and given back before the claim lapses): step 1 has not gone out.
    const due = Date.parse(held?.openedAt ?? '') + 2000
    await waitFor('step 1 is due', () => Date.now() > due + 100)
    assert.equal(about('/step1', 'request.opened', id).length, 0, 'nothing while held')
    await claim(id, 'dan', 'DELETE')
    const released = await waitFor('given back', () => about('/hook', 'request.unclaimed', id)[0])
    assert.equal((released.body.unclaimed as { reason: string }).reason, 'released')
    await waitFor('step 1 after the release', () => about('/step1', 'request.opened', id).length === 1)
    assert.equal(await counter('krg_claims_total', { team: 'blue', outcome: 'released' }), releasedBefore + 1)
    await answer(id)
    await waitFor('closed', () => about('/step1', 'request.closed', id).length === 1)
  })

  test('a step later than the deadline is never sent, nor its closing', async () => {
    const q = rt.ask({ title: 'Quick one', fields: FIELDS, deadlineS: 3 })
    const id = q.request_id
    // Fixed in the plan from the start: step 2 (4 s) is later than the deadline (3 s).
    const rec = await waitFor('the plan', () => record(id))
    assert.equal(rec.steps[2]?.state, 'beyond_deadline')
    await waitFor('step 1', () => about('/step1', 'request.opened', id).length === 1)
    await waitFor('timed out', () => about('/step1', 'request.closed', id).length === 1)
    await waitFor('the closing to step 0', () => about('/hook', 'request.closed', id).length === 1)
    assert.equal(pagerEvents(id).length, 0, 'the pager never heard of it')
    const final = await record(id)
    assert.equal(final?.steps[2]?.state, 'beyond_deadline')
  })

  test('a reload of the notify file (SIGHUP) applies to questions opened after it', async () => {
    const first = rt.ask({ title: 'Before the reload', fields: FIELDS, deadlineS: 300 }).request_id
    await waitFor('its plan', () => record(first))
    await writeFile(
      file,
      JSON.stringify({ teams: { blue: [{ url: `${base}/hook` }, { url: `${base}/late`, after_s: 1 }] } }),
    )
    const reloads = await counter('krg_notify_file_reloads_total', { outcome: 'applied' })
    process.emit('SIGHUP')
    await waitFor(
      'reloaded',
      async () => (await counter('krg_notify_file_reloads_total', { outcome: 'applied' })) > reloads,
    )
    const second = rt.ask({ title: 'After the reload', fields: FIELDS, deadlineS: 300 }).request_id
    await waitFor('the old plan for the first', () => about('/step1', 'request.opened', first).length === 1)
    await waitFor('the new plan for the second', () => about('/late', 'request.opened', second).length === 1)
    await answer(first)
    await answer(second)
    await waitFor('both closed', () => about('/hook', 'request.closed', second).length === 1)
    await waitFor('the first closed at step 1', () => about('/step1', 'request.closed', first).length === 1)
    await waitFor(
      'the second closed at its step 1',
      () => about('/late', 'request.closed', second).length === 1,
    )
    assert.equal(about('/late', 'request.opened', first).length, 0)
    assert.equal(about('/step1', 'request.opened', second).length, 0)
    await writeFile(file, JSON.stringify(plan()))
    const applied = await counter('krg_notify_file_reloads_total', { outcome: 'applied' })
    process.emit('SIGHUP')
    await waitFor(
      'the first plan again',
      async () => (await counter('krg_notify_file_reloads_total', { outcome: 'applied' })) > applied,
    )
  })

  test('a handoff escalates the same way, its end being its deadline; its end goes to the notified', async () => {
    // The run's last test: a handoff fixes the run's verdict.
    const handoffs = (path: string, type: string) =>
      rx.received.filter((r) => r.path === path && r.headers['x-krg-event'] === type)
    const before = (path: string) => handoffs(path, 'escalation.started').length
    const [hook, step1] = [before('/hook'), before('/step1')]
    rt.escalate('a person, please', 3)
    await waitFor('step 1 of the handoff', () => before('/step1') === step1 + 1)
    assert.equal(before('/hook'), hook + 1)
    assert.equal(handoffs('/step1', 'escalation.started').at(-1)?.body.step, 1)
    const rec = await waitFor('its record', async () => {
      const value = (await gw.app.board.read('s1')).get(escalationField(rt.run, 'escalation'))
      return value === undefined ? null : parseEscalationState(value)
    })
    // Its deadline is the pause's end as the run's configuration says (runner.escalation_pause_s).
    assert.match(String(rec.deadline), /^\d{4}-\d\d-\d\dT/)
    assert.equal(rec.item, 'escalation')
    await waitFor('the pause ended, told to the notified', () =>
      ['/hook', '/step1'].every((p) => handoffs(p, 'escalation.ended').length > 0),
    )
  })
})
