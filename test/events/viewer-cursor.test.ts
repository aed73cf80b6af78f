import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BusMessage, Delivery } from '../../src/events/bus.ts'
import { frameOf } from '../../src/events/sse.ts'
import { ViewerCursor } from '../../src/events/viewer-cursor.ts'

/** The no-gap/no-duplicate rule both buses share, checked on its own. */

const ev = (run: string, seq: number): BusMessage => ({ kind: 'event', run, seq, type: 'log', data: '{}' })
const closed = (run: string): BusMessage => ({ kind: 'closed', run })
const d = (m: BusMessage): Delivery => ({ message: m, frame: frameOf(m) })
const ids = (batch: readonly Delivery[]): string[] =>
  batch.map((x) =>
    x.message.kind === 'event' ? `${x.message.run}:${x.message.seq}` : `closed:${x.message.run}`,
  )

test('a fresh cursor admits everything once, in order, and nothing twice', () => {
  const c = new ViewerCursor()
  assert.equal(c.admit(ev('r1', 1)), true)
  assert.equal(c.admit(ev('r1', 2)), true)
  assert.equal(c.admit(ev('r1', 2)), false, 'the same event again')
  assert.equal(c.admit(ev('r1', 1)), false, 'an older one of the same run')
  assert.equal(c.admit(ev('r1', 5)), true, 'a gap is not the cursor’s business: it is shown')
  assert.deepEqual([c.run, c.seq], ['r1', 5])
})

test('a cursor started at a position admits only what follows it in that run', () => {
  const c = new ViewerCursor('r1', 50)
  assert.equal(c.admit(ev('r1', 1)), false, 'a reader re-reading the run from its start adds nothing')
  assert.equal(c.admit(ev('r1', 50)), false)
  assert.equal(c.admit(ev('r1', 51)), true)
  assert.equal(c.admit(ev('r0', 3)), true, 'another run is not filtered by the position')
})

test('a closed run: its closed once, none of its events after it; a new run starts afresh', () => {
  const c = new ViewerCursor()
  assert.equal(c.admit(ev('r1', 1)), true)
  assert.equal(c.admit(closed('r1')), true)
  assert.equal(c.admit(closed('r1')), false, 'closed once')
  assert.equal(c.admit(ev('r1', 2)), false, 'nothing of a run after its closed')
  assert.equal(c.admit(ev('r2', 1)), true, 'a new run')
  assert.equal(c.admit(closed('r1')), false, 'the old run’s closed, re-appended, still once')
  assert.equal(c.admit(closed('r2')), true)
})

test('admitAll hands back the very same array when all is new, and only what is new otherwise', () => {
  const c = new ViewerCursor('r1', 2)
  const all = [d(ev('r1', 3)), d(ev('r1', 4))]
  assert.equal(c.admitAll(all), all, 'the shared batch, not a copy')
  const mixed = [d(ev('r1', 4)), d(ev('r1', 5)), d(ev('r1', 5)), d(ev('r1', 6)), d(closed('r1'))]
  assert.deepEqual(ids(c.admitAll(mixed)), ['r1:5', 'r1:6', 'closed:r1'])
  assert.deepEqual(c.admitAll(mixed), [], 'all of it seen')
})

test('a bus that knows more of a delivery adds its own check in front of the rule', () => {
  class Numbered extends ViewerCursor {
    last = 0
    protected override admits(x: Delivery & { n?: number }): boolean {
      if ((x.n ?? 0) <= this.last) return false
      this.last = x.n ?? 0
      return super.admits(x)
    }
  }
  const c = new Numbered()
  const batch = [
    { ...d(ev('r1', 1)), n: 1 },
    { ...d(ev('r1', 2)), n: 1 },
    { ...d(ev('r1', 2)), n: 2 },
  ]
  assert.deepEqual(ids(c.admitAll(batch)), ['r1:1', 'r1:2'])
})

test('cursors in step: same run and seq and the same closed of that run; an earlier closed run does not count', () => {
  const late = new ViewerCursor('r2', 3)
  const seenAll = new ViewerCursor()
  seenAll.admitAll([d(ev('r1', 1)), d(closed('r1')), d(ev('r2', 1)), d(ev('r2', 3))])
  assert.equal(late.inStepWith(seenAll), true, 'r1 closed for good: it cannot tell them apart')
  assert.equal(new ViewerCursor('r2', 2).inStepWith(seenAll), false, 'another seq')
  assert.equal(new ViewerCursor('r3', 3).inStepWith(seenAll), false, 'another run')
  seenAll.admit(closed('r2'))
  assert.equal(late.inStepWith(seenAll), false, 'one had the current run closed, the other not')
  late.admit(closed('r2'))
  assert.equal(late.inStepWith(seenAll), true)
})
