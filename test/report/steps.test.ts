import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { type EscalationState, escalationField } from '../../src/escalation/state.ts'
import { reportCsv } from '../../src/report/csv.ts'
import { buildReport } from '../../src/report/stats.ts'
import { type QuestionRecord, stepLabel } from '../../src/report/types.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { RUNTIME_TOKEN } from '../helpers/runtime-gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { fastEnv, openOverview } from '../overview/helpers.ts'
import { questionRecord, SESSION_TOKEN, write } from './helpers.ts'

/** The team report by escalation step (issue 39): counts per team and person, the CSV's column, the metric's label. */

const now = Date.now()
const iso = (agoS: number) => new Date(now - agoS * 1000).toISOString()

function question(id: string, extra: Partial<QuestionRecord>): QuestionRecord {
  return questionRecord(id, 'blue', now, extra)
}

const timedOut = { closedBy: 'timeout', sub: null, name: null, via: null, closedAt: iso(300) } as const

test('stepLabel: 0 to 5 as they are, anything later 6+ (a bounded label)', () => {
  assert.deepEqual([undefined, 0, 1, 5, 6, 40].map(stepLabel), ['0', '0', '1', '5', '6+', '6+'])
})

test('how questions ended by step, per team and per person, and the CSV step column', () => {
  const records = [
    // Written before steps were kept: before any escalation.
    question('old', {}),
    question('a0', { step: 0 }),
    question('a1', { step: 1 }),
    question('b1', { step: 1, sub: 'eve', name: 'Eve' }),
    question('b2', { step: 2, sub: 'eve', name: 'Eve' }),
    question('b9', { step: 9, sub: 'eve', name: 'Eve' }),
    question('t2', { ...timedOut, step: 2 }),
    question('t0', { ...timedOut, step: 0 }),
    question('c1', { closedBy: 'cancel', sub: null, name: null, via: null, step: 1 }),
  ]
  const report = buildReport('24h', ['blue'], records, now, () => true)
  const [blue] = report.teams
  assert.deepEqual(blue?.questions.bySteps, {
    answered: { '0': 2, '1': 2, '2': 1, '6+': 1 },
    timedOut: { '2': 1, '0': 1 },
  })
  const people = Object.fromEntries(report.all.people.map((p) => [p.sub, p.questions.bySteps.answered]))
  assert.deepEqual(people, { dan: { '0': 2, '1': 1 }, eve: { '1': 1, '2': 1, '6+': 1 } })
  assert.deepEqual(
    report.timeouts.map((x) => [x.requestId, x.step]),
    [
      ['t0', 0],
      ['t2', 2],
    ],
  )

  const lines = reportCsv(records, () => true)
    .slice(1)
    .split('\r\n')
  const header = (lines[0] as string).split(',')
  assert.equal(header.at(-1), 'step')
  const stepOf = (id: string) =>
    lines
      .find((l) => l.includes(`"${id}"`))
      ?.split(',')
      .at(-1)
  assert.deepEqual(
    ['old', 'a0', 'a1', 'b9', 't2', 'c1'].map(stepOf),
    ['', '0', '1', '9', '2', '1'],
    'the step sent as it is (empty for a record from before)',
  )
})

test('the recorder takes the highest step sent from the board record as the question closes; the answer metric has the step', async (t) => {
  const runtime = await startSimulatedRuntime({
    messagingToken: RUNTIME_TOKEN,
    sessionToken: SESSION_TOKEN,
    deliveryStepMs: 10,
  })
  t.after(() => runtime.close())
  const gw = await startGateway({ ...fastEnv, GATEWAY_LEASE_MS: '1000' })
  t.after(() => gw.close())
  await gw.app.sessions.put({
    kasmId: 'k1',
    upstream: runtime.url,
    team: 'blue',
    messagingToken: RUNTIME_TOKEN,
    source: 'admin',
  })
  const dan = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  await openOverview(t, gw, dan).then((o) => o.until('k1 shown', (e) => e.has('k1')))

  const fields = [{ id: 'choice', type: 'string', enum: ['a', 'b'], required: true }]
  /** The engine's record of a question with `sent` steps out and one more due. */
  const escalate = async (requestId: string, sent: number[]) => {
    const at = new Date().toISOString()
    const state: EscalationState = {
      run: runtime.run,
      item: requestId,
      openedAt: at,
      steps: [
        ...sent.map((step) => ({
          step,
          afterS: step * 30,
          state: 'sent' as const,
          at,
          targets: [{ kind: 'webhook' as const, label: `team:blue#${step}`, outcome: 'sent' as const }],
        })),
        { step: 99, afterS: 9999, state: 'due', at: null, targets: [] },
      ],
      next: null,
    }
    await gw.app.board.set('k1', escalationField(runtime.run, requestId), JSON.stringify(state))
  }
  const answer = async (requestId: string) =>
    write(
      gw.url,
      'k1',
      'messages',
      { authorization: `Bearer ${dan}` },
      {
        run: runtime.run,
        key: requestId,
        reply_to: requestId,
        revision: 1,
        values: { choice: 'a' },
      },
    )

  const first = runtime.ask({ title: 'After the second step', fields, deadlineS: 120 })
  await escalate(first.request_id, [0, 1])
  await answer(first.request_id)
  const late = runtime.ask({ title: 'After the seventh step', fields, deadlineS: 120 })
  await escalate(late.request_id, [0, 1, 2, 3, 4, 5, 6, 7])
  await answer(late.request_id)
  // No record at all (a team without a notify file): before any escalation.
  const quiet = runtime.ask({ title: 'Nobody looked', fields, deadlineS: 0.3 })

  const records = await waitFor('three closings recorded', async () => {
    const all = await gw.app.teamReport.store.list(['blue'], now - 3600_000)
    const closed = all.filter((r): r is QuestionRecord => r.kind === 'question')
    return closed.length === 3 ? closed : null
  })
  const steps = Object.fromEntries(records.map((r) => [r.requestId, [r.closedBy, r.step]]))
  assert.deepEqual(steps, {
    [first.request_id]: ['reply', 1],
    [late.request_id]: ['reply', 7],
    [quiet.request_id]: ['timeout', 0],
  })

  const scrape = await (await request(`${gw.url}/metrics`)).body.text()
  const count = (step: string) =>
    new RegExp(
      `^krg_question_answer_seconds_count\\{team="blue",via="api",step="${step.replace('+', '\\+')}"\\} (\\d+)$`,
      'm',
    ).exec(scrape)?.[1]
  assert.deepEqual(['0', '1', '6+', '7'].map(count), ['0', '1', '1', undefined])
})
