import assert from 'node:assert/strict'
import { test } from 'node:test'
import { escalationField } from '../../src/escalation/state.ts'
import { escalationsIn } from '../../src/overview/escalations.ts'

/** What of a board's escalation record reaches the overview frame (and so every viewer): labels only, bounded. */

test('an escalation record as the overview shows it: known fields only, bounded, unreadable parts dropped', () => {
  const at = '2026-12-06T10:00:00.000Z'
  const step = (n: number) => ({
    step: n,
    afterS: n * 30,
    state: 'sent',
    at,
    targets: [{ kind: 'webhook', label: `team:red#${n}`, outcome: 'sent', url: 'https://hooks.example/key' }],
  })
  const fields = new Map([
    [
      escalationField('run-1', 'q1'),
      JSON.stringify({
        run: 'run-1',
        item: 'q1',
        openedAt: at,
        routingKey: 'never-shown',
        steps: [
          step(0),
          { ...step(1), targets: [{ kind: 'fax', label: 'fax:1', outcome: 'sent' }] },
          { ...step(2), state: 'exploded' },
          { ...step(3), at: 'yesterday' },
          {
            step: 4,
            afterS: 120,
            state: 'due',
            at: null,
            targets: [
              { kind: 'person', label: 'p'.repeat(500), outcome: 'planned', reason: 'ignored' },
              { kind: 'person', label: 'person:oscar', outcome: 'skipped', reason: 'no_linked_account' },
            ],
          },
          ...Array.from({ length: 40 }, (_, i) => step(5 + i)),
        ],
        next: { step: 4, at: 'soon' },
      }),
    ],
    [escalationField('run-1', 'q2'), '{not json'],
    [escalationField('run-0', 'q9'), JSON.stringify({ run: 'run-0', item: 'q9', openedAt: at, steps: [] })],
    [
      escalationField('run-1', 'q3'),
      JSON.stringify({ run: 'run-1', item: 'q3', openedAt: 'never', steps: [] }),
    ],
  ])
  const views = escalationsIn(fields, 'run-1')
  assert.deepEqual(
    [...views.keys()],
    ['q1'],
    'another run, unreadable JSON and a record without a time left out',
  )
  const view = views.get('q1')
  assert.ok(view !== undefined)
  const shown = JSON.stringify(view)
  assert.ok(
    !shown.includes('hooks.example') && !shown.includes('never-shown'),
    'no field the view does not know',
  )
  assert.equal(view.steps.length, 19, 'at most 20 steps read, the one of an unknown state dropped')
  assert.deepEqual(view.steps[1]?.targets, [], 'a target of an unknown kind dropped')
  assert.equal(view.steps[2]?.at, null, 'a time that is no time is none')
  const planned = view.steps[3]?.targets
  assert.equal(planned?.[0]?.label.length, 120, 'a label clipped')
  assert.equal(planned?.[0]?.reason, undefined, 'a reason only on a skipped target')
  assert.equal(planned?.[1]?.reason, 'no_linked_account')
  assert.equal(view.next, null, 'a next step without a time is none')
})
