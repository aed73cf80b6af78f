import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BusMessage, Delivery } from '../../src/events/bus.ts'
import { MemoryEventBus, MemoryReaderLease } from '../../src/events/memory-bus.ts'
import { eventFrame, Heartbeat, parseEventId, runComment } from '../../src/events/sse.ts'

const ev = (run: string, seq: number, type = 'log'): BusMessage => ({
  kind: 'event',
  run,
  seq,
  type,
  data: JSON.stringify({ seq, type, ts: 't', [type]: { n: seq } }),
})

/** A subscriber that records what it got, as `run:seq` ids (and `closed:run`), plus gaps and batches. */
function recorder() {
  const got: string[] = []
  const gaps: Array<[number, number]> = []
  const batches: Array<{ batch: readonly Delivery[]; replay: boolean }> = []
  return {
    got,
    gaps,
    batches,
    deliver(batch: readonly Delivery[], replay?: boolean) {
      batches.push({ batch, replay: replay === true })
      for (const d of batch) {
        got.push(d.message.kind === 'event' ? `${d.message.run}:${d.message.seq}` : `closed:${d.message.run}`)
      }
    },
    gap(from: number, to: number) {
      gaps.push([from, to])
    },
  }
}

test('sse framing: one data line per payload line, ids parsed from the last colon', () => {
  assert.equal(eventFrame('r1', 7, 'log', '{"a":1}').toString(), 'id: r1:7\nevent: log\ndata: {"a":1}\n\n')
  assert.equal(eventFrame('r', 1, 'x', 'a\nb').toString(), 'id: r:1\nevent: x\ndata: a\ndata: b\n\n')
  // A newline smuggled into a run id or type cannot start a forged field.
  assert.equal(eventFrame('r\nevent: evil', 1, 't\ndata: x', '{}').toString().split('\n').length, 5)
  assert.equal(runComment('run-1').toString(), ': run run-1\n')
  assert.deepEqual(parseEventId('a:b:12'), { run: 'a:b', seq: 12 })
  assert.equal(parseEventId('nocolon'), null)
  assert.equal(parseEventId(':5'), null)
  assert.equal(parseEventId('r:-1'), null)
  assert.equal(parseEventId('r:1e3'), null)
  assert.equal(parseEventId('r:'), null)
})

test('heartbeat: one timer while targets exist, every target pinged each interval, in slices', async () => {
  const hb = new Heartbeat(150)
  const pings = new Map<string, number>()
  const targets = Array.from({ length: 30 }, (_, i) => ({
    ping: () => pings.set(String(i), (pings.get(String(i)) ?? 0) + 1),
  }))
  assert.equal(hb.running, false)
  for (const target of targets) hb.add(target)
  assert.equal(hb.running, true)
  assert.equal(hb.size, 30)
  const deadline = Date.now() + 5000
  while ([...pings.values()].filter((n) => n >= 2).length < 30 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10))
  }
  assert.equal(pings.size, 30, 'every target was pinged')
  assert.ok([...pings.values()].every((n) => n >= 2))
  for (const target of targets.slice(1)) hb.delete(target)
  assert.equal(hb.running, true)
  hb.delete(targets[0] as (typeof targets)[number])
  assert.equal(hb.running, false)
  assert.equal(hb.size, 0)
})

test('live fan-out hands every subscriber the same batch and the same frame bytes', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const subs = [recorder(), recorder(), recorder()]
  for (const s of subs) await bus.subscribe('k', {}, s)
  assert.equal(await bus.append('k', [ev('r1', 1), ev('r1', 2)], 1), true)
  for (const s of subs) assert.deepEqual(s.got, ['r1:1', 'r1:2'])
  const first = subs[0]?.batches[0]
  assert.ok(first)
  assert.equal(first.replay, false)
  for (const s of subs) assert.equal(s.batches[0]?.batch, first.batch, 'same array object for everyone')
  assert.equal(
    first.batch[0]?.frame.toString(),
    `id: r1:1\nevent: log\ndata: ${(ev('r1', 1) as { data: string }).data}\n\n`,
  )
})

test('replay by run and after, from the first event for another or no run, then live without gap', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  await bus.append(
    'k',
    [1, 2, 3, 4, 5].map((n) => ev('r1', n)),
    1,
  )

  const byAfter = recorder()
  await bus.subscribe('k', { run: 'r1', after: 3 }, byAfter)
  assert.deepEqual(byAfter.got, ['r1:4', 'r1:5'])
  assert.equal(byAfter.batches[0]?.replay, true)

  const other = recorder()
  await bus.subscribe('k', { run: 'old-run', after: 3 }, other)
  assert.deepEqual(other.got, ['r1:1', 'r1:2', 'r1:3', 'r1:4', 'r1:5'])

  const none = recorder()
  await bus.subscribe('k', {}, none)
  assert.deepEqual(none.got, other.got)

  const runOnly = recorder()
  await bus.subscribe('k', { run: 'r1' }, runOnly)
  assert.deepEqual(runOnly.got, other.got)

  const atEnd = recorder()
  await bus.subscribe('k', { run: 'r1', after: 5 }, atEnd)
  assert.deepEqual(atEnd.got, [])

  await bus.append('k', [ev('r1', 6)], 1)
  assert.deepEqual(byAfter.got, ['r1:4', 'r1:5', 'r1:6'])
  assert.deepEqual(atEnd.got, ['r1:6'])
})

test('stored seqs are never stored or delivered twice; a viewer ahead of the bus gets no duplicate', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const live = recorder()
  await bus.subscribe('k', {}, live)
  await bus.append('k', [ev('r1', 1), ev('r1', 2)], 1)
  await bus.append('k', [ev('r1', 2), ev('r1', 3)], 1)
  assert.deepEqual(live.got, ['r1:1', 'r1:2', 'r1:3'])
  assert.deepEqual(await bus.head('k'), { run: 'r1', seq: 3, closed: false })

  // A viewer that already saw up to 5 (from another replica, or before a restart) on a fresh bus.
  const fresh = new MemoryEventBus({ capacity: 16 })
  const ahead = recorder()
  await fresh.subscribe('k', { run: 'r1', after: 5 }, ahead)
  await fresh.append(
    'k',
    [4, 5, 6].map((n) => ev('r1', n)),
    1,
  )
  assert.deepEqual(ahead.got, ['r1:6'])
})

test('evicted events are reported as a gap before the replay', async () => {
  const bus = new MemoryEventBus({ capacity: 4 })
  await bus.append(
    'k',
    [1, 2, 3, 4, 5, 6, 7, 8].map((n) => ev('r1', n)),
    1,
  )
  const behind = recorder()
  await bus.subscribe('k', { run: 'r1', after: 2 }, behind)
  assert.deepEqual(behind.gaps, [[3, 4]])
  assert.deepEqual(behind.got, ['r1:5', 'r1:6', 'r1:7', 'r1:8'])
  const justInTime = recorder()
  await bus.subscribe('k', { run: 'r1', after: 4 }, justInTime)
  assert.deepEqual(justInTime.gaps, [])
  assert.deepEqual(justInTime.got, ['r1:5', 'r1:6', 'r1:7', 'r1:8'])
})

test('a new run empties the buffer and reaches live subscribers in order', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const live = recorder()
  await bus.subscribe('k', {}, live)
  await bus.append('k', [ev('r1', 1), ev('r1', 2), ev('r2', 1)], 1)
  await bus.append('k', [ev('r2', 2)], 1)
  assert.deepEqual(live.got, ['r1:1', 'r1:2', 'r2:1', 'r2:2'])
  assert.deepEqual(await bus.head('k'), { run: 'r2', seq: 2, closed: false })
  const late = recorder()
  await bus.subscribe('k', { run: 'r1', after: 1 }, late)
  assert.deepEqual(late.got, ['r2:1', 'r2:2'])
})

test('closed is delivered once, replayed to later subscribers, and a new run reopens', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const live = recorder()
  await bus.subscribe('k', {}, live)
  await bus.append('k', [ev('r1', 1), { kind: 'closed', run: 'r1' }], 1)
  await bus.append('k', [{ kind: 'closed', run: 'r1' }, ev('r1', 2)], 1)
  assert.deepEqual(live.got, ['r1:1', 'closed:r1'])
  assert.deepEqual(await bus.head('k'), { run: 'r1', seq: 1, closed: true })

  const late = recorder()
  await bus.subscribe('k', { run: 'r1', after: 1 }, late)
  assert.deepEqual(late.got, ['closed:r1'])

  await bus.append('k', [ev('r2', 1)], 1)
  assert.deepEqual(await bus.head('k'), { run: 'r2', seq: 1, closed: false })
  assert.deepEqual(live.got, ['r1:1', 'closed:r1', 'r2:1'])
})

test('a stale fence is refused and stores nothing', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const lease = new MemoryReaderLease()
  const first = await lease.acquire('k')
  const second = await lease.acquire('k')
  assert.ok(second > first)
  assert.equal(await lease.renew('k', first), false)
  assert.equal(await lease.renew('k', second), true)
  assert.equal(await bus.append('k', [ev('r1', 1)], second), true)
  assert.equal(await bus.append('k', [ev('r1', 2)], first), false)
  assert.deepEqual(await bus.head('k'), { run: 'r1', seq: 1, closed: false })
  await lease.release('k', second)
  assert.equal(await lease.renew('k', second), false)
})

test('closing subscriptions and dropping sessions frees them', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const subs = await Promise.all([1, 2, 3].map(() => bus.subscribe('k', {}, recorder())))
  await bus.subscribe('other', {}, recorder())
  assert.equal(bus.stats().subscribers, 4)
  for (const s of subs) s.close()
  assert.equal(bus.stats().subscribers, 1)
  await bus.append('k', [ev('r1', 1)], 1)
  await bus.drop('k')
  assert.equal(await bus.head('k'), null)
  assert.deepEqual(bus.stats(), { sessions: 1, subscribers: 1, stored: 0 })
  await bus.close()
  assert.deepEqual(bus.stats(), { sessions: 0, subscribers: 0, stored: 0 })
})
