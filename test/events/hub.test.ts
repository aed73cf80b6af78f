import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BusMessage, Delivery } from '../../src/events/bus.ts'
import { MemoryEventBus } from '../../src/events/memory-bus.ts'
import { PreparedBatch } from '../../src/events/prepared-batch.ts'
import { frameOf } from '../../src/events/sse.ts'
import { ev } from './bus-contract.ts'

/*
 * The hub over the memory broker, beyond the bus contract: each live batch is filtered and prepared once for
 * every viewer in step, and a viewer out of step (ahead of the log, or joined later) gets exactly what its
 * own cursor admits, then shares the broadcast once it caught up.
 */

const closed = (run: string): BusMessage => ({ kind: 'closed', run })

function viewer() {
  const got: Array<{ ids: string[]; replay: boolean; batch: readonly Delivery[]; prepared: PreparedBatch }> =
    []
  return {
    got,
    live: () => got.filter((g) => !g.replay),
    deliver(batch: readonly Delivery[], replay: boolean, prepared: PreparedBatch) {
      assert.equal(prepared.deliveries, batch, 'the prepared batch describes the batch handed over')
      const ids = batch.map((d) =>
        d.message.kind === 'event' ? `${d.message.run}:${d.message.seq}` : `closed:${d.message.run}`,
      )
      got.push({ ids, replay, batch, prepared })
    },
  }
}

test('viewers in step share one prepared batch; a viewer ahead gets only what follows, then shares it too', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const a = viewer()
  const b = viewer()
  const ahead = viewer()
  await bus.subscribe('k', {}, a)
  await bus.subscribe('k', {}, b)
  await bus.subscribe('k', { run: 'r1', after: 3 }, ahead)

  bus.appendNow('k', [ev('r1', 1), ev('r1', 2)], 1)
  assert.deepEqual(a.live()[0]?.ids, ['r1:1', 'r1:2'])
  assert.equal(b.live()[0]?.prepared, a.live()[0]?.prepared, 'one prepared batch for both')
  assert.deepEqual(ahead.got, [], 'nothing at or below its position')

  bus.appendNow('k', [ev('r1', 2), ev('r1', 3), ev('r1', 4)], 1)
  assert.deepEqual(a.live()[1]?.ids, ['r1:3', 'r1:4'])
  assert.deepEqual(ahead.live()[0]?.ids, ['r1:4'], 'still ahead: its own cut of the batch')
  assert.equal(ahead.live()[0]?.prepared.events, 1)

  bus.appendNow('k', [ev('r1', 5)], 1)
  const fifth = a.live()[2]
  assert.ok(fifth)
  assert.deepEqual(fifth.ids, ['r1:5'])
  assert.equal(ahead.live()[1]?.prepared, fifth.prepared, 'caught up: the shared batch')
  assert.equal(b.live()[2]?.prepared, fifth.prepared)
  assert.equal(fifth.prepared.run, 'r1')
  assert.equal(fifth.prepared.bytes, fifth.batch[0]?.frame, 'a single frame is written as it is')
  assert.equal(bus.stats('k').subscribers, 3)
})

test('a viewer that joins after a closed run gets the new run live, once, beside the viewers that saw it close', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const summary = viewer()
  await bus.subscribe('k', {}, summary)
  bus.appendNow('k', [ev('r1', 1), closed('r1')], 1)
  bus.appendNow('k', [ev('r2', 1)], 1)
  const late = viewer()
  await bus.subscribe('k', {}, late)
  assert.deepEqual(
    late.got.map((g) => [g.ids, g.replay]),
    [[['r2:1'], true]],
  )

  bus.appendNow('k', [ev('r2', 1), ev('r2', 2), ev('r2', 3)], 1)
  assert.deepEqual(
    late.live().map((g) => g.ids),
    [['r2:2', 'r2:3']],
  )
  assert.equal(late.live()[0]?.prepared, summary.live().at(-1)?.prepared, 'all of it: the shared batch')
  assert.deepEqual(
    summary.got.map((g) => g.ids),
    [['r1:1', 'closed:r1'], ['r2:1'], ['r2:2', 'r2:3']],
  )
})

test('a prepared batch is one run, no closed and small, or not joined at all', () => {
  const d = (m: BusMessage): Delivery => ({ message: m, frame: frameOf(m) })
  const two = new PreparedBatch([d(ev('r1', 1)), d(ev('r1', 2))])
  assert.equal(two.run, 'r1')
  assert.equal(two.events, 2)
  assert.deepEqual(two.bytes, Buffer.concat([frameOf(ev('r1', 1)), frameOf(ev('r1', 2))]))
  assert.equal(two.bytes, two.bytes, 'joined once')
  assert.equal(new PreparedBatch([d(ev('r1', 1)), d(ev('r2', 1))]).run, null, 'two runs')
  const withClosed = new PreparedBatch([d(ev('r1', 1)), d(closed('r1'))])
  assert.equal(withClosed.run, null, 'a closed ends the stream: written frame by frame')
  assert.equal(withClosed.events, 1)
  const long = new PreparedBatch(Array.from({ length: 65 }, (_, i) => d(ev('r1', i + 1))))
  assert.equal(long.run, null, 'a long batch is written in bounded pieces')
  assert.equal(long.events, 65)
})

test('events appended while a join is in flight reach the joining viewer once, before what follows', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const early = viewer()
  await bus.subscribe('k', {}, early)
  bus.appendNow('k', [ev('r1', 1)], 1)
  // The join reads its history now and goes on in a later microtask: these appends fall in between.
  const joiner = viewer()
  const joining = bus.subscribe('k', { run: 'r1', after: 0 }, joiner)
  bus.appendNow('k', [ev('r1', 2), ev('r1', 3)], 1)
  await joining
  bus.appendNow('k', [ev('r1', 4)], 1)
  assert.deepEqual(
    joiner.got.map((g) => [g.ids, g.replay]),
    [
      [['r1:1'], true],
      [['r1:2', 'r1:3'], true],
      [['r1:4'], false],
    ],
  )
  assert.deepEqual(
    early.got.map((g) => g.ids),
    [['r1:1'], ['r1:2', 'r1:3'], ['r1:4']],
  )
})
