import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ReconnectPolicy } from '../../src/events/reconnect-policy.ts'

const timing = { notUpPollMs: 1500, backoffMs: [1000, 2000, 4000] }

test('polls while the runtime was never live, backs off step by step after a drop, the last step repeating', () => {
  const policy = new ReconnectPolicy(timing)
  assert.deepEqual([policy.nextDelayMs(), policy.nextDelayMs()], [1500, 1500])
  policy.connected()
  policy.dropped()
  assert.deepEqual(
    [policy.nextDelayMs(), policy.nextDelayMs(), policy.nextDelayMs(), policy.nextDelayMs()],
    [1000, 2000, 4000, 4000],
  )
})

test('a connection that gets through ends the backing off; only a healthy stream restarts the schedule', () => {
  const policy = new ReconnectPolicy(timing)
  policy.connected()
  policy.dropped()
  assert.equal(policy.nextDelayMs(), 1000)
  assert.equal(policy.backingOff, true)
  policy.connected()
  assert.equal(policy.backingOff, false, 'the runtime answered: a failure now is not a dead runtime')
  assert.equal(policy.nextDelayMs(), 1500)
  // Dropped again at once, without carrying an event: the schedule goes on where it was.
  policy.dropped()
  assert.equal(policy.nextDelayMs(), 2000)
  policy.connected()
  policy.healthy()
  policy.dropped()
  assert.equal(policy.nextDelayMs(), 1000)
})

test('reset starts over as the first attempt', () => {
  const policy = new ReconnectPolicy(timing)
  policy.dropped()
  policy.nextDelayMs()
  policy.reset()
  assert.equal(policy.backingOff, false)
  assert.equal(policy.nextDelayMs(), 1500)
  policy.dropped()
  assert.equal(policy.nextDelayMs(), 1000)
  assert.equal(policy.longestMs, 4000)
})
