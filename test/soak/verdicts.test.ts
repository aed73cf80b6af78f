import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { heapVerdict, runVerdict } from './verdicts.ts'

const ids = (run: string, from: number, to: number): string[] =>
  Array.from({ length: to - from + 1 }, (_, i) => `${run}:${from + i}`)

describe('soak verdicts', () => {
  it('accepts a whole run up to its sentinel, and an old run cut short by a new one', () => {
    assert.equal(runVerdict(ids('a', 1, 5), 'a:5'), 'ok')
    assert.equal(runVerdict([...ids('a', 1, 3), ...ids('b', 1, 4)], 'b:4'), 'ok')
  })

  it('names a hole, a duplicate, a reorder, a run that comes back and a missing sentinel', () => {
    assert.match(runVerdict(['a:1', 'a:3'], 'a:3'), /missing 2/)
    assert.match(runVerdict(['a:1', 'a:2', 'a:2'], 'a:2'), /duplicate 2/)
    assert.match(runVerdict(['a:1', 'a:3', 'a:2'], 'a:3'), /out of order/)
    assert.match(runVerdict(['a:1', 'b:1', 'a:2'], 'a:2'), /came back/)
    assert.match(runVerdict(ids('a', 1, 4), 'a:6'), /missing 5/)
    assert.match(runVerdict([...ids('a', 2, 3), ...ids('b', 1, 2)], 'b:2'), /a: missing 1/)
    assert.match(runVerdict(ids('a', 1, 4), 'b:1'), /ended in another run/)
  })

  it('judges heap growth on the floors after warm-up, and says when a run is too short', () => {
    const mib = 1024 * 1024
    const series = (bytesAt: (s: number) => number, seconds: number) =>
      Array.from({ length: seconds / 2 + 1 }, (_, i) => ({ at: i * 2000, bytes: bytesAt(i * 2) }))
    const flat = heapVerdict(series((s) => (40 + (s % 6)) * mib, 120))
    assert.equal(flat.failure, null)
    assert.match(flat.summary, /floor 40\.0 MiB \(first half\), 40\.0 MiB/)
    const leak = heapVerdict(series((s) => (40 + s) * mib, 120))
    assert.match(leak.failure ?? '', /kept growing/)
    const short = heapVerdict(series(() => 40 * mib, 30))
    assert.equal(short.failure, null)
    assert.match(short.summary, /too short/)
  })
})
