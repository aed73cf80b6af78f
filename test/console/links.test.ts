import assert from 'node:assert/strict'
import { test } from 'node:test'
import { focusOf, notificationFocus, sessionPath } from '../../src/console/links.ts'

test('a question’s link carries its run, and reads back as it was made; a link without one still names a question', () => {
  const focus = { request: 'q1', run: 'run-20260916T140200Z-a1b2c3' }
  const path = sessionPath('/console/', 'k 1', focus)
  assert.equal(path, '/console/sessions/k%201?run=run-20260916T140200Z-a1b2c3&request=q1')
  assert.deepEqual(focusOf(new URL(path, 'https://gw.test').search), focus)
  // Links from before runs were named, and hand-made ones.
  assert.deepEqual(focusOf('?request=q1'), { request: 'q1' })
  assert.deepEqual(focusOf('?run=&request=q1'), { request: 'q1' })
  assert.deepEqual(focusOf(`?run=${'r'.repeat(101)}&request=q1`), { request: 'q1' })
  assert.equal(focusOf(`?request=${'q'.repeat(101)}`), null)
  assert.equal(sessionPath('/', 'k1', { request: 'q&2' }), '/sessions/k1?request=q%262')
  assert.equal(sessionPath('/', 'k1', { handoff: true }), '/sessions/k1?handoff')
  assert.deepEqual(focusOf('?run=r1&handoff'), { handoff: true })
})

test('a notification’s link names its question with the run it was asked in', () => {
  assert.deepEqual(notificationFocus({ type: 'request.opened', run: 'r2', request: { request_id: 'q1' } }), {
    request: 'q1',
    run: 'r2',
  })
  assert.deepEqual(notificationFocus({ type: 'escalation.started', run: 'r2' }), { handoff: true })
  assert.equal(notificationFocus({ type: 'request.closed', run: 'r2', request: { request_id: 'q1' } }), null)
})
