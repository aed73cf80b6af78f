import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { Report } from '../../src/report/stats.ts'
import type { HandoffRecord, QuestionRecord, ReportRecord } from '../../src/report/types.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { RUNTIME_TOKEN } from '../helpers/runtime-gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { fastEnv, openOverview } from '../overview/helpers.ts'
import { playSequence, reportCounts, SEQUENCE_COUNTS, SESSION_TOKEN, writer } from './helpers.ts'

/**
 * The scripted sequence against the simulated runtime through a real gateway (embedded): the six
 * metrics, the records behind the report and the report itself. The session is summarised because a person's
 * overview shows it (as the console keeps it), which is what the report counts.
 */

const env = { ...fastEnv, GATEWAY_LEASE_MS: '1000' }

async function register(url: string, runtimeUrl: string): Promise<void> {
  const admin = await bearer({ sub: 'root', roles: ['admin'] })
  const res = await request(`${url}/admin/sessions/k1`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: runtimeUrl, team: 'blue', messagingToken: RUNTIME_TOKEN }),
  })
  await res.body.dump()
  assert.ok(res.statusCode === 201 || res.statusCode === 200)
}

test('the scripted sequence: every metric once, the records with who and through what, the report', async (t) => {
  const runtime = await startSimulatedRuntime({
    messagingToken: RUNTIME_TOKEN,
    sessionToken: SESSION_TOKEN,
    deliveryStepMs: 10,
  })
  t.after(() => runtime.close())
  const gw = await startGateway(env)
  t.after(() => gw.close())
  await register(gw.url, runtime.url)
  const dan = await bearer({ sub: 'dan', name: 'Dan Operator', roles: ['operator'], teams: ['blue'] })
  await openOverview(t, gw, dan).then((o) => o.until('k1 shown', (e) => e.has('k1')))

  const before = await reportCounts([gw.url], 'blue')
  assert.deepEqual(
    before,
    {
      ...SEQUENCE_COUNTS,
      opened: 0,
      closed: zero(SEQUENCE_COUNTS.closed),
      answers: zero(SEQUENCE_COUNTS.answers),
      noTimeLeft: 0,
      deadlineLeftCount: 0,
      handoffs: zero(SEQUENCE_COUNTS.handoffs),
      handoffWaits: 0,
    },
    'every series of the team at 0 from the first scrape',
  )

  const { runs, timedOut } = await playSequence(runtime, 'k1', () => gw.url, await writer(gw.url, dan))
  const counts = await waitFor('the sequence counted', async () => {
    const now = await reportCounts([gw.url], 'blue')
    return now.handoffWaits === 2 && now.closed.reply === 2 && now.opened === 5 ? now : null
  })
  assert.deepEqual(counts, SEQUENCE_COUNTS)

  const records = await gw.app.teamReport.store.list(['blue'], Date.now() - 3600_000)
  const questions = records.filter((r): r is QuestionRecord => r.kind === 'question')
  assert.deepEqual(
    questions.map((q) => [q.closedBy, q.via, q.sub, q.name]),
    [
      ['reply', 'api', 'dan', 'Dan Operator'],
      ['reply', 'console', 'dan', 'Dan Operator'],
      ['timeout', null, null, null],
      ['cancel', null, null, null],
      ['run_end', null, null, null],
    ],
  )
  const handoffs = records.filter((r) => r.kind === 'handoff')
  assert.deepEqual(
    handoffs.map((h) => [h.kind === 'handoff' && h.endedBy, h.via, h.sub, h.run]),
    [
      ['operator', 'sidebar', 'dan', runs[0]],
      ['timeout', null, null, runs[1]],
    ],
  )
  // Nothing a person typed or chose is kept: ids, a title, times and fixed words.
  assert.ok(!JSON.stringify(records).includes('"choice"'), 'no field values in the records')

  const res = await request(`${gw.url}/api/report?window=24h`, {
    headers: { authorization: `Bearer ${dan}` },
  })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['cache-control'], 'no-store')
  const report = (await res.body.json()) as Report
  assert.deepEqual(
    report.teams.map((x) => x.team),
    ['blue'],
  )
  const q = report.all.questions
  assert.deepEqual(
    [q.questions, q.answered, q.inTime, q.late, q.timeouts, q.cancelled, q.runEnded, q.inTimeShare],
    // In time: 1 of the 3 that waited for a person until they closed (2 answered, 1 timed out).
    [5, 2, 1, 1, 1, 1, 1, 0.333],
  )
  assert.ok(q.medianAnswerS !== null && q.p90AnswerS !== null && q.p90AnswerS >= q.medianAnswerS)
  assert.deepEqual(q.via, { console: 1, sidebar: 0, api: 1, slack: 0, msteams: 0, unknown: 0 })
  assert.deepEqual(
    report.timeouts.map((x) => [x.kasmId, x.run, x.requestId, x.title]),
    [['k1', runs[0], timedOut, '=HYPERLINK("http://evil.example")']],
  )
  assert.deepEqual(
    [report.all.handoffs.handoffs, report.all.handoffs.byPerson, report.all.handoffs.ranOut],
    [2, 1, 1],
  )
  assert.deepEqual(
    report.all.people.map((p) => [
      p.sub,
      p.name,
      p.questions.answered,
      p.questions.inTime,
      p.handoffs.byPerson,
    ]),
    [['dan', 'Dan Operator', 2, 1, 1]],
  )
  const buckets = report.series.reduce((n, b) => n + b.inTime + b.late + b.timeouts, 0)
  assert.equal(report.series.length, 24)
  assert.equal(buckets, 3, 'the chart has the two answers and the timeout')
})

test('a restart: the runtime replays its run to the new process, which counts none of it again', async (t) => {
  const runtime = await startSimulatedRuntime({
    messagingToken: RUNTIME_TOKEN,
    sessionToken: SESSION_TOKEN,
    deliveryStepMs: 10,
  })
  t.after(() => runtime.close())
  const dan = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] })
  const first = await startGateway(env)
  t.after(() => first.close())
  await register(first.url, runtime.url)
  const overview = await openOverview(t, first, dan)
  await overview.until('k1 shown', (e) => e.has('k1'))
  const fields = [{ id: 'x', type: 'string' }]
  const q = runtime.ask({ title: 'Answered before the restart', fields, deadlineS: 120 })
  const reply = async (url: string, question: { request_id: string; revision: number }, key: string) => {
    const res = await request(`${url}/desktop/k1/mcp/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${dan}` },
      body: JSON.stringify({
        run: runtime.run,
        key,
        reply_to: question.request_id,
        revision: question.revision,
        values: { x: 'y' },
      }),
    })
    await res.body.dump()
    assert.equal(res.statusCode, 202)
  }
  await reply(first.url, q, 'before')
  runtime.escalate('before the restart', 0.2)
  await waitFor('the first process counted both', async () => {
    const c = await reportCounts([first.url], 'blue')
    return c.closed.reply === 1 && c.handoffs.timeout === 1
  })
  overview.close()
  await first.close()

  // The same runtime, a new gateway process: its reader's first connection gets the run's whole buffer.
  const second = await startGateway(env)
  t.after(() => second.close())
  await register(second.url, runtime.url)
  const again = await openOverview(t, second, dan)
  await again.until(
    'the replayed handoff folded',
    (e) => e.get('k1')?.summary?.lastEscalation?.endedBy === 'timeout',
  )
  const q2 = runtime.ask({ title: 'Answered after the restart', fields, deadlineS: 120 })
  await reply(second.url, q2, 'after')
  const counts = await waitFor('the new answer counted', async () => {
    const c = await reportCounts([second.url], 'blue')
    return c.closed.reply === 1 ? c : null
  })
  assert.equal(counts.opened, 1, 'only the question asked after the restart opened here')
  assert.equal(counts.handoffs.timeout, 0, 'the handoff of before the restart is history')
  assert.equal(counts.answers.api, 1)
  const records = await second.app.teamReport.store.list(null, 0)
  assert.deepEqual(
    records.map((r: ReportRecord) => (r.kind === 'handoff' ? r.kind : [r.kind, r.requestId])),
    [
      ['opened', q2.request_id],
      ['question', q2.request_id],
    ],
  )
})

test('a pause the runtime ends with any word but operator ran out, whatever the word; every pause of a run counts', async (t) => {
  const runtime = await startSimulatedRuntime({ messagingToken: RUNTIME_TOKEN, sessionToken: SESSION_TOKEN })
  t.after(() => runtime.close())
  const gw = await startGateway(env)
  t.after(() => gw.close())
  await register(gw.url, runtime.url)
  const dan = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] })
  await openOverview(t, gw, dan).then((o) => o.until('k1 shown', (e) => e.has('k1')))

  // One run escalating again and again, as another runtime may: each pause ended by its own escalation record.
  const long = `ran-${'out'.repeat(30)}`
  const words: (string | undefined)[] = [
    'deadline',
    'timeout',
    'expired',
    undefined,
    'run_ended',
    long,
    'operator',
  ]
  let n = 0
  const pause = (reason: string) =>
    runtime.emit('iteration', { n: ++n, tool_calls: [{ name: 'escalate', args: { reason } }] })
  for (const [i, word] of words.entries()) {
    pause(`pause ${i}`)
    runtime.emit('escalation', {
      reason: `pause ${i}`,
      paused_s: i + 1,
      ...(word === undefined ? {} : { ended_by: word }),
    })
  }
  // And one still paused when the run ends: the gateway saw the run end.
  pause('the last pause')
  runtime.closeTrace({ done: true })

  const counts = await waitFor('every pause counted', async () => {
    const c = await reportCounts([gw.url], 'blue')
    return c.handoffWaits === words.length + 1 ? c : null
  })
  assert.deepEqual(counts.handoffs, { operator: 1, timeout: words.length - 1, run_end: 1 })
  const handoffs = (await gw.app.teamReport.store.list(['blue'], 0)).filter(
    (r): r is HandoffRecord => r.kind === 'handoff',
  )
  handoffs.sort((a, b) => a.reason.localeCompare(b.reason, 'en', { numeric: true }))
  assert.deepEqual(
    handoffs.map((h) => [h.reason, h.endedBy, h.runtimeEndedBy, h.waitS]),
    [
      ['pause 0', 'timeout', 'deadline', 1],
      ['pause 1', 'timeout', 'timeout', 2],
      ['pause 2', 'timeout', 'expired', 3],
      ['pause 3', 'timeout', 'unknown', 4],
      ['pause 4', 'timeout', 'run_ended', 5],
      ['pause 5', 'timeout', `${long.slice(0, 39)}…`, 6],
      ['pause 6', 'operator', 'operator', 7],
      ['the last pause', 'run_end', null, handoffs.at(-1)?.waitS],
    ],
  )

  const res = await request(`${gw.url}/api/report`, { headers: { authorization: `Bearer ${dan}` } })
  const report = (await res.body.json()) as Report
  const hs = report.all.handoffs
  assert.deepEqual([hs.handoffs, hs.byPerson, hs.ranOut, hs.runEnded], [8, 1, 6, 1])
  const csv = await request(`${gw.url}/api/report.csv`, { headers: { authorization: `Bearer ${dan}` } })
  const text = await csv.body.text()
  assert.match(text, /,"timeout",,1,,,,"deadline",\r\n/, "a run-out handoff's row keeps the runtime's word")
  assert.match(text, /,"run_end",,\d+(\.\d)?,,,,,\r\n/, 'the run end has none')
})

function zero(counts: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.keys(counts).map((k) => [k, 0]))
}
