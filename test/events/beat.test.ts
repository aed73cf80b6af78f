import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BEAT_MS, Beat, type BeatWait, beatFor } from '../../src/events/beat.ts'

/** A wait that records when it fired and what had fired by the end of that turn. */
function recorder(name: string, fired: string[], turns: string[][]): BeatWait & { at: number[] } {
  const at: number[] = []
  return {
    due: 0,
    at,
    fire: () => {
      at.push(Date.now())
      fired.push(name)
      setImmediate(() => turns.push([...fired]))
    },
  }
}

function until(check: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const poll = setInterval(() => {
      if (!check()) return
      clearInterval(poll)
      resolve()
    }, 5)
  })
}

test('waits armed together fire in one turn, early by less than a beat; then the beat stops', async () => {
  const beat = new Beat(40)
  const fired: string[] = []
  const turns: string[][] = []
  const a = recorder('a', fired, turns)
  const b = recorder('b', fired, turns)
  const c = recorder('c', fired, turns)
  const dueA = Date.now() + 200
  beat.arm(a, 200)
  // Due 39 ms after a's beat: the same beat (40 ms) however the clock moved meanwhile.
  const dueB = a.due + 39
  beat.arm(b, dueB - Date.now())
  const dueC = Date.now() + 600
  beat.arm(c, 600)
  assert.equal(beat.armed, 3)
  await until(() => fired.length === 3)
  // a and b are due within one beat: one turn saw both.
  const first = turns.find((seen) => seen.includes('a'))
  assert.ok(first?.includes('b'), `a and b in one turn: ${JSON.stringify(turns)}`)
  // c is due 400 ms later: in that turn only if the turn itself came that late (a stalled, loaded machine).
  assert.ok(!first?.includes('c') || (a.at[0] ?? 0) > dueC - 40 - 2, 'c is due 400 ms later')
  for (const [at, due] of [
    [a.at[0], dueA],
    [b.at[0], dueB],
    [c.at[0], dueC],
  ] as const) {
    assert.ok(at !== undefined && at > due - 40 - 2, `fired ${due - (at ?? 0)} ms early, a beat is 40`)
  }
  assert.equal(beat.armed, 0)
})

test('arming again moves a wait; a disarmed wait never fires; a wait armed again from its own fire waits', async () => {
  const beat = new Beat(20)
  const fired: string[] = []
  const turns: string[][] = []
  const moved = recorder('moved', fired, turns)
  const dropped = recorder('dropped', fired, turns)
  beat.arm(moved, 100)
  beat.arm(dropped, 100)
  beat.arm(moved, 400)
  beat.disarm(dropped)
  assert.equal(beat.armed, 1, 'only the moved wait is armed')
  let again = 0
  const repeating: BeatWait = {
    due: 0,
    fire: () => {
      again++
      if (again < 3) beat.arm(repeating, 100)
    },
  }
  beat.arm(repeating, 100)
  const armedAt = Date.now()
  await until(() => again === 3 && fired.length === 1)
  assert.deepEqual(fired, ['moved'])
  assert.ok((moved.at[0] ?? 0) - armedAt > 400 - 20 - 2, 'the moved wait fired at its new due time')
  // Armed again from its own fire, it came back a wait later each time (three fires, never two in one tick).
  assert.ok(Date.now() - armedAt >= 3 * (100 - 20) - 2)
  assert.equal(beat.armed, 0)
})

test('the beat of a lease: 250 ms by default, shorter for a short lease, so a renewal is four beats or more', () => {
  assert.equal(beatFor(5000), BEAT_MS)
  assert.equal(beatFor(600), 50)
  assert.ok(600 / 3 / beatFor(600) >= 4)
})
