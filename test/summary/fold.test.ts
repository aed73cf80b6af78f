import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type FoldInput, SummaryFold } from '../../src/summary/fold.ts'
import type { Transition } from '../../src/summary/types.ts'

/** A trace the way the runtime writes it: seq, type, ts and one payload field named after the type. */
class Trace {
  readonly run: string
  readonly start: number
  seq = 0
  constructor(run = 'run-1', start = Date.parse('2026-09-16T14:00:00Z')) {
    this.run = run
    this.start = start
  }
  event(type: string, payload?: unknown, field = type): FoldInput {
    const seq = ++this.seq
    const ts = new Date(this.start + seq * 1000).toISOString()
    const record: Record<string, unknown> = { seq, type, ts }
    if (type !== 'done') record[field] = payload ?? {}
    return { kind: 'event', run: this.run, seq, type, data: JSON.stringify(record) }
  }
}

function foldAll(fold: SummaryFold, inputs: FoldInput[]): Transition[] {
  return inputs.flatMap((i) => [...fold.apply(i)])
}

const request = (id: string, deadline: string, state = 'open', extra: Record<string, unknown> = {}) => ({
  run: 'run-1',
  request_id: id,
  revision: 1,
  title: `Question ${id}`,
  fields: [
    { id: 'browser', type: 'string', enum: ['a', 'b'] },
    { id: 'n', type: 'integer' },
  ],
  deadline,
  state,
  ...extra,
})

test('a run with a loop: phase, open questions soonest first, their closing, the verdict', () => {
  const fold = new SummaryFold()
  const t = new Trace()
  const opened = foldAll(fold, [
    t.event('info', {
      run_id: 'run-1',
      app: 'expenses',
      goal: 'File the report',
      mode: 'run',
      agentic: true,
    }),
    t.event('status', { phase: 'agentic', detail: 'goal: …' }),
    t.event('request', request('q1', '2026-09-16T14:10:00Z')),
    t.event('request', request('q2', '2026-09-16T14:05:00Z')),
  ])
  assert.deepEqual(
    opened.map((x) => x.type),
    ['request.opened', 'request.opened'],
  )
  let s = fold.snapshot()
  assert.equal(s.app, 'expenses')
  assert.equal(s.goal, 'File the report')
  assert.equal(s.phase, 'agentic')
  assert.equal(s.loop, 'running')
  assert.deepEqual(
    s.openRequests.map((r) => [r.requestId, r.deadline]),
    [
      ['q2', '2026-09-16T14:05:00.000Z'],
      ['q1', '2026-09-16T14:10:00.000Z'],
    ],
  )
  assert.deepEqual(s.openRequests[0]?.fieldIds, ['browser', 'n'])
  assert.deepEqual(s.openRequests[0]?.fieldTypes, ['string', 'integer'])

  const closed = foldAll(fold, [
    t.event(
      'request',
      request('q2', '2026-09-16T14:05:00Z', 'closed', { closed_by: 'reply', reply_id: 'm1' }),
    ),
    t.event('action', { id: 'a1', action: 'stop', state: 'accepted' }),
  ])
  assert.deepEqual(closed, [
    {
      type: 'request.closed',
      run: 'run-1',
      seq: 5,
      at: '2026-09-16T14:00:05.000Z',
      request: s.openRequests[0],
      closedBy: 'reply',
      // When q2 opened (its event's time): how long the answer took.
      openedAt: '2026-09-16T14:00:04.000Z',
    },
  ])
  assert.equal(fold.snapshot().loop, 'stopping')
  foldAll(fold, [t.event('action', { id: 'a1', action: 'stop', state: 'stopped' })])
  assert.equal(fold.snapshot().loop, 'exited')

  const ended = foldAll(fold, [
    t.event('status', {
      phase: 'done',
      verdict: 'inconclusive',
      outcome: 'stopped',
      summary: 'Stopped by operator.',
    }),
    t.event('done'),
  ])
  // The question still open closes with the run, at the time of its `done`.
  assert.deepEqual(
    ended.map((x) => [x.type, x.type === 'request.closed' ? [x.closedBy, x.openedAt] : null, x.at]),
    [
      ['request.closed', ['run_ended', '2026-09-16T14:00:03.000Z'], '2026-09-16T14:00:09.000Z'],
      ['run.ended', null, '2026-09-16T14:00:09.000Z'],
    ],
  )
  s = fold.snapshot()
  assert.equal(s.verdict, 'inconclusive')
  assert.equal(s.outcome, 'stopped')
  assert.equal(s.conclusion, 'Stopped by operator.')
  assert.equal(s.ended, 'done')
  assert.deepEqual(s.openRequests, [])
})

test('a handoff pause: started by the escalate call, with its reason and end, ended by the record', () => {
  const fold = new SummaryFold()
  const t = new Trace()
  foldAll(fold, [
    t.event('info', { agentic: true, operator_config: { runner: { escalation_pause_s: 600 } } }),
    t.event('status', { phase: 'agentic' }),
  ])
  const started = foldAll(fold, [
    t.event('iteration', {
      n: 7,
      content: 'stuck',
      tool_calls: [{ name: 'escalate', args: { reason: '2FA on a phone' } }],
    }),
  ])
  assert.deepEqual(started, [
    {
      type: 'escalation.started',
      run: 'run-1',
      seq: 3,
      at: '2026-09-16T14:00:03.000Z',
      reason: '2FA on a phone',
    },
  ])
  const pause = fold.snapshot().escalation
  assert.equal(pause?.reason, '2FA on a phone')
  assert.equal(pause?.startedAt, '2026-09-16T14:00:03.000Z')
  assert.equal(pause?.endsAt, '2026-09-16T14:10:03.000Z')
  assert.equal(fold.snapshot().loop, 'exited')
  const ended = foldAll(fold, [
    t.event('escalation', {
      reason: '2FA on a phone',
      paused_s: 42,
      before: null,
      after: null,
      ended_by: 'operator',
    }),
  ])
  assert.deepEqual(ended, [
    {
      type: 'escalation.ended',
      run: 'run-1',
      seq: 4,
      at: '2026-09-16T14:00:04.000Z',
      reason: '2FA on a phone',
      endedBy: 'operator',
      fromRecord: true,
      startedAt: '2026-09-16T14:00:03.000Z',
      startSeq: 3,
      pausedS: 42,
    },
  ])
  assert.equal(fold.snapshot().escalation, null)
  assert.deepEqual(fold.snapshot().lastEscalation, {
    reason: '2FA on a phone',
    pausedS: 42,
    endedBy: 'operator',
  })
})

test('a new run resets the summary and closes what the old one left open; a closed trace ends it', () => {
  const fold = new SummaryFold()
  const a = new Trace('run-a')
  foldAll(fold, [a.event('info', { app: 'one' }), a.event('request', request('q1', '2026-09-16T14:10:00Z'))])
  const b = new Trace('run-b')
  const moved = foldAll(fold, [b.event('info', { app: 'two' })])
  assert.deepEqual(
    moved.map((x) => [x.type, x.run]),
    [['request.closed', 'run-a']],
  )
  assert.equal(fold.snapshot().run, 'run-b')
  assert.equal(fold.snapshot().app, 'two')
  assert.deepEqual(fold.snapshot().openRequests, [])
  const closed = foldAll(fold, [{ kind: 'closed', run: 'run-b' }])
  assert.deepEqual(
    closed.map((x) => x.type),
    ['run.ended'],
  )
  assert.equal(fold.snapshot().ended, 'closed')
})

test('the summary carries no message text, no field values and no payload it does not need', () => {
  const fold = new SummaryFold()
  const t = new Trace()
  foldAll(fold, [
    t.event('request', request('q1', '2026-09-16T14:10:00Z', 'open', { help: 'secret-help-text' })),
    t.event('message', { id: 'm1', text: 'secret-message-text', state: 'pending' }),
    t.event(
      'message',
      { id: 'm2', reply_to: 'q1', values: { browser: 'secret-value' }, state: 'pending' },
      'message',
    ),
    t.event('delivery', { id: 'm1', text: 'secret-message-text', state: 'queued' }, 'message'),
    t.event('iteration', { n: 1, content: 'secret-model-content', tool_calls: [] }),
    t.event('log', { level: 'info', msg: 'secret-log-line' }),
    t.event('step', { n: 1, action: 'type(secret-step)', result: 'ok' }),
  ])
  const json = JSON.stringify(fold.snapshot())
  for (const secret of [
    'secret-help',
    'secret-message',
    'secret-value',
    'secret-model',
    'secret-log',
    'secret-step',
  ])
    assert.ok(!json.includes(secret), `${secret} leaked into the summary`)
  assert.equal(fold.snapshot().lastActivity, '2026-09-16T14:00:07.000Z')
})

test('hostile payloads: bad JSON, wrong types, long and multi-line text, traversal paths, floods, replays', () => {
  const fold = new SummaryFold()
  const t = new Trace()
  const at = (seq: number, type: string, data: string): FoldInput => ({
    kind: 'event',
    run: 'run-1',
    seq,
    type,
    data,
  })
  foldAll(fold, [
    at(1, 'info', '{not json'),
    at(2, 'info', '[1,2,3]'),
    at(3, 'status', JSON.stringify({ status: 'agentic' })),
    at(4, 'request', JSON.stringify({ request: { request_id: 42, state: 'open' } })),
    at(5, 'screenshot', JSON.stringify({ screenshot: { file: '../../etc/passwd' } })),
    at(6, 'screenshot', JSON.stringify({ screenshot: { file: 'screenshots/.hidden.png' } })),
    at(7, 'info', JSON.stringify({ info: { app: `a\u001b[31m\nb${'x'.repeat(500)}`, goal: 12 } })),
  ])
  const s = fold.snapshot()
  assert.equal(s.phase, null)
  assert.deepEqual(s.openRequests, [])
  assert.equal(s.screenshot, null)
  assert.equal(s.goal, null)
  assert.ok(s.app?.startsWith('a [31m b'), s.app ?? '')
  assert.ok([...(s.app ?? '')].length <= 100)

  t.seq = 7
  const flood = Array.from({ length: 80 }, (_, i) =>
    t.event('request', request(`q${i}`, '2026-09-16T14:10:00Z')),
  )
  assert.equal(foldAll(fold, flood).length, 50, 'at most 50 open questions are tracked')
  const before = fold.revision
  // An event at or below the last seq (a replayed duplicate) changes nothing.
  assert.deepEqual(foldAll(fold, [at(3, 'request', JSON.stringify({ request: request('dup', 'x') }))]), [])
  assert.equal(fold.revision, before)
  // Activity alone does not count as a change people would notice.
  foldAll(fold, [t.event('log', { level: 'info', msg: 'tick' })])
  assert.equal(fold.revision, before)
  foldAll(fold, [
    t.event('screenshot', { file: 'screenshots/0001-click.png', step: 3, width: 64, height: 40 }),
  ])
  assert.deepEqual(fold.snapshot().screenshot, {
    file: 'screenshots/0001-click.png',
    step: 3,
    width: 64,
    height: 40,
  })
  assert.ok(fold.revision > before)
})
