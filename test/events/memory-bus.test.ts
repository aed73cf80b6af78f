import assert from 'node:assert/strict'
import { test } from 'node:test'
import { storedBytes } from '../../src/events/bus.ts'
import { MemoryEventBus, MemoryReaderLease } from '../../src/events/memory-bus.ts'
import { eventFrame, Heartbeat, runComment } from '../../src/events/sse.ts'
import { parseEventId } from '../../src/protocol/events.ts'
import { waitFor } from '../helpers/wait.ts'
import { ev, recorder } from './bus-contract.ts'

/*
 * The event-bus contract's scenarios (fan-out, replay, deduplication, runs, closed, eviction gaps) run against
 * the memory bus in test/cluster/bus-conformance.test.ts, asserting that its deliveries are synchronous. Here:
 * SSE framing, the heartbeat, and what only the memory bus and its lease promise.
 */

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
  await waitFor('every target pinged twice', () => [...pings.values()].filter((n) => n >= 2).length === 30)
  assert.equal(pings.size, 30, 'every target was pinged')
  assert.ok([...pings.values()].every((n) => n >= 2))
  for (const target of targets.slice(1)) hb.delete(target)
  assert.equal(hb.running, true)
  hb.delete(targets[0] as (typeof targets)[number])
  assert.equal(hb.running, false)
  assert.equal(hb.size, 0)
})

test('live fan-out hands every subscriber the very same batch array', async () => {
  const bus = new MemoryEventBus({ capacity: 16 })
  const subs = [recorder(), recorder(), recorder()]
  for (const s of subs) await bus.subscribe('k', {}, s)
  assert.equal(await bus.append('k', [ev('r1', 1), ev('r1', 2)], 1), true)
  const first = subs[0]?.batches[0]
  assert.ok(first)
  for (const s of subs) {
    assert.deepEqual(s.got, ['r1:1', 'r1:2'])
    assert.equal(s.batches[0]?.batch, first.batch, 'same array object for everyone')
  }
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
  assert.deepEqual(bus.stats(), { sessions: 1, subscribers: 1, stored: 0, bytes: 0 })
  await bus.close()
  assert.deepEqual(bus.stats(), { sessions: 0, subscribers: 0, stored: 0, bytes: 0 })
})

test('the process-wide budget evicts the oldest events of any session first; a new run frees its old one', async () => {
  const big = (run: string, seq: number) => ({ ...ev(run, seq), data: `{"pad":"${'p'.repeat(900)}"}` })
  const one = storedBytes({ message: big('ra', 1), frame: eventFrame('ra', 1, 'log', big('ra', 1).data) })
  const bus = new MemoryEventBus({ capacity: 100, maxBytes: 50 * one, totalBytes: 10 * one })
  const lease = new MemoryReaderLease()
  const [a, b] = [await lease.acquire('a'), await lease.acquire('b')]
  for (let seq = 1; seq <= 6; seq++) bus.appendNow('a', [big('ra', seq)], a)
  for (let seq = 1; seq <= 6; seq++) bus.appendNow('b', [big('rb', seq)], b)
  // 12 events, room for 10: a's two oldest went first, although a's own budget had room.
  assert.equal(bus.stats().bytes, 10 * one)
  assert.deepEqual(bus.stats('a'), { sessions: 2, subscribers: 0, stored: 4, bytes: 4 * one })
  assert.deepEqual(bus.stats('b'), { sessions: 2, subscribers: 0, stored: 6, bytes: 6 * one })
  const replay = recorder()
  await bus.subscribe('a', { run: 'ra', after: 0 }, replay)
  assert.deepEqual(replay.gaps, [[1, 2]])
  assert.deepEqual(replay.got, ['ra:3', 'ra:4', 'ra:5', 'ra:6'])
  bus.appendNow('b', [big('rc', 1)], b)
  assert.equal(bus.stats().bytes, 5 * one)
  await bus.drop('a')
  assert.equal(bus.stats().bytes, one)
})
