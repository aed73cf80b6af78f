import assert from 'node:assert/strict'
import { describe, type TestContext, test } from 'node:test'
import type { BusMessage, Delivery, EventBus } from '../../src/events/bus.ts'
import { MemoryEventBus, MemoryReaderLease } from '../../src/events/memory-bus.ts'
import { eventFrame } from '../../src/events/sse.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * The event-bus contract, one set of scenarios for every bus: embedded mode (memory bus) and cluster mode
 * (Redis bus) must behave the same for the viewer. test/cluster/bus-conformance.test.ts runs it against both;
 * test/events/memory-bus.test.ts adds what only the memory bus promises.
 */

/** A stored event `run:seq` of `type`, with a small JSON payload. */
export const ev = (run: string, seq: number, type = 'log'): BusMessage => ({
  kind: 'event',
  run,
  seq,
  type,
  data: JSON.stringify({ seq, type, ts: 't', [type]: { n: seq } }),
})

/** A subscriber that records what it got, as `run:seq` ids (and `closed:run`), plus gaps and batches. */
export function recorder() {
  const got: string[] = []
  const gaps: Array<[number, number]> = []
  /** Runs told with nothing to deliver (`Subscriber.served`). */
  const told: string[] = []
  const batches: Array<{ batch: readonly Delivery[]; replay: boolean }> = []
  return {
    got,
    gaps,
    told,
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
    served(run: string) {
      told.push(run)
    },
  }
}

/** One bus under test, fresh for each scenario. */
export interface BusHarness {
  bus: EventBus
  /**
   * Whether live events reach subscribers before `append` resolves (the memory bus: then the scenarios assert
   * at once; otherwise, as with Redis's live channels, they wait for the deliveries).
   */
  synchronous: boolean
  /** A fence that may append to `kasmId`. */
  fence(kasmId: string): Promise<number>
  close(): Promise<void>
}

/** The byte budget per session of the buses under test: room for the small events, not the big ones. */
export const BUS_TEST_BYTES = 8192

/** A memory bus (capacity 16, {@link BUS_TEST_BYTES}) with its reader lease. */
export async function memoryHarness(): Promise<BusHarness> {
  const bus = new MemoryEventBus({ capacity: 16, maxBytes: BUS_TEST_BYTES })
  const lease = new MemoryReaderLease()
  return {
    bus,
    synchronous: true,
    fence: (k) => lease.acquire(k),
    close: () => bus.close(),
  }
}

/** Registers the contract's scenarios against the bus that `make` builds. */
export function busContract(name: string, make: () => Promise<BusHarness>): void {
  /** Asserts a live delivery: at once on a synchronous bus, else once it arrived (or the wait ran out). */
  const eq = async (h: BusHarness, what: string, actual: () => unknown, expected: unknown): Promise<void> => {
    if (!h.synchronous) {
      await waitFor(what, () => JSON.stringify(actual()) === JSON.stringify(expected)).catch(() => {})
    }
    assert.deepEqual(actual(), expected, what)
  }

  /** A fresh bus, closed after the test, and the fence that may append to session `k`. */
  const start = async (t: TestContext): Promise<{ h: BusHarness; fence: number }> => {
    const h = await make()
    t.after(() => h.close())
    return { h, fence: await h.fence('k') }
  }

  describe(`event bus contract: ${name}`, () => {
    test('live fan-out: every subscriber gets each event once, in order, with the one frame', async (t) => {
      const h = await make()
      t.after(() => h.close())
      const subs = [recorder(), recorder(), recorder()]
      for (const s of subs) await h.bus.subscribe('k', {}, s)
      assert.equal(await h.bus.append('k', [ev('r1', 1), ev('r1', 2)], await h.fence('k')), true)
      for (const s of subs) await eq(h, 'live delivery', () => s.got, ['r1:1', 'r1:2'])
      const first = subs[0]?.batches[0]
      assert.ok(first)
      assert.equal(first.replay, false)
      const data = (ev('r1', 1) as { data: string }).data
      assert.equal(first.batch[0]?.frame.toString(), `id: r1:1\nevent: log\ndata: ${data}\n\n`)
      assert.deepEqual(first.batch[0]?.frame, eventFrame('r1', 1, 'log', data))
    })

    test('replay by run and after, from the first event otherwise, then live without gap', async (t) => {
      const { h, fence } = await start(t)
      await h.bus.append(
        'k',
        [1, 2, 3, 4, 5].map((n) => ev('r1', n)),
        fence,
      )

      const byAfter = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 3 }, byAfter)
      assert.deepEqual(byAfter.got, ['r1:4', 'r1:5'])
      assert.equal(byAfter.batches[0]?.replay, true)

      const all = ['r1:1', 'r1:2', 'r1:3', 'r1:4', 'r1:5']
      for (const from of [{ run: 'old-run', after: 3 }, {}, { run: 'r1' }]) {
        const r = recorder()
        await h.bus.subscribe('k', from, r)
        assert.deepEqual(r.got, all, JSON.stringify(from))
      }
      const atEnd = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 5 }, atEnd)
      assert.deepEqual(atEnd.got, [])

      await h.bus.append('k', [ev('r1', 6)], fence)
      await eq(h, 'after-replay live', () => byAfter.got, ['r1:4', 'r1:5', 'r1:6'])
      await eq(h, 'at-end live', () => atEnd.got, ['r1:6'])
    })

    test('a subscription says which run the bus served, also when nothing is replayed', async (t) => {
      const { h, fence } = await start(t)
      assert.equal((await h.bus.subscribe('k', {}, recorder())).servedRun, null)
      await h.bus.append('k', [ev('r1', 1), ev('r1', 2)], fence)
      const atHead = recorder()
      const sub = await h.bus.subscribe('k', { run: 'r1', after: 2 }, atHead)
      assert.equal(sub.servedRun, 'r1')
      assert.deepEqual(atHead.got, [])
      assert.equal((await h.bus.subscribe('k', { run: 'older', after: 9 }, recorder())).servedRun, 'r1')
    })

    test('a subscriber at a position past what the reader first reads is told the run then, once', async (t) => {
      const { h, fence } = await start(t)
      // A stream at the runtime's current position on a session nobody read yet: nothing is stored.
      const ahead = recorder()
      assert.equal((await h.bus.subscribe('k', { run: 'r1', after: 3 }, ahead)).servedRun, null)
      const fresh = recorder()
      await h.bus.subscribe('k', {}, fresh)
      await h.bus.append('k', [ev('r1', 1), ev('r1', 2), ev('r1', 3)], fence)
      await eq(h, 'the run told', () => ahead.told, ['r1'])
      assert.deepEqual(ahead.got, [])
      await eq(h, 'the events', () => fresh.got, ['r1:1', 'r1:2', 'r1:3'])
      assert.deepEqual(fresh.told, [], 'a subscriber handed events learns the run from them')
      await h.bus.append('k', [ev('r1', 4)], fence)
      await eq(h, 'then live', () => ahead.got, ['r1:4'])
      assert.deepEqual(ahead.told, ['r1'], 'once')
      // Joining while the run is stored: `servedRun` says it, nothing more is told.
      const late = recorder()
      assert.equal((await h.bus.subscribe('k', { run: 'r1', after: 4 }, late)).servedRun, 'r1')
      await h.bus.append('k', [ev('r1', 5)], fence)
      await eq(h, 'late live', () => late.got, ['r1:5'])
      assert.deepEqual(late.told, [])
    })

    test('a stored seq is never stored or delivered twice; a viewer ahead gets no duplicate', async (t) => {
      const { h, fence } = await start(t)
      const live = recorder()
      await h.bus.subscribe('k', {}, live)
      await h.bus.append('k', [ev('r1', 1), ev('r1', 2)], fence)
      await h.bus.append('k', [ev('r1', 2), ev('r1', 3)], fence)
      await eq(h, 'deduplicated', () => live.got, ['r1:1', 'r1:2', 'r1:3'])
      assert.deepEqual(await h.bus.head('k'), { run: 'r1', seq: 3, closed: false })

      const ahead = recorder()
      await h.bus.subscribe('fresh', { run: 'r1', after: 5 }, ahead)
      await h.bus.append(
        'fresh',
        [4, 5, 6].map((n) => ev('r1', n)),
        await h.fence('fresh'),
      )
      await eq(h, 'only what the viewer lacks', () => ahead.got, ['r1:6'])
      // A sentinel on the live subscriber's session: anything of the other session would have come before it.
      await h.bus.append('k', [ev('r1', 4)], fence)
      await eq(h, 'nothing but the sentinel after', () => live.got, ['r1:1', 'r1:2', 'r1:3', 'r1:4'])
    })

    test('a new run reaches live subscribers in order and replays alone', async (t) => {
      const { h, fence } = await start(t)
      const live = recorder()
      await h.bus.subscribe('k', {}, live)
      await h.bus.append('k', [ev('r1', 1), ev('r1', 2), ev('r2', 1)], fence)
      await h.bus.append('k', [ev('r2', 2)], fence)
      await eq(h, 'both runs live', () => live.got, ['r1:1', 'r1:2', 'r2:1', 'r2:2'])
      assert.deepEqual(await h.bus.head('k'), { run: 'r2', seq: 2, closed: false })
      const late = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 1 }, late)
      assert.deepEqual(late.got, ['r2:1', 'r2:2'])
    })

    test('closed is delivered once, replayed later, and a new run reopens', async (t) => {
      const { h, fence } = await start(t)
      const live = recorder()
      await h.bus.subscribe('k', {}, live)
      await h.bus.append('k', [ev('r1', 1), { kind: 'closed', run: 'r1' }], fence)
      await h.bus.append('k', [{ kind: 'closed', run: 'r1' }, ev('r1', 2)], fence)
      await eq(h, 'closed once', () => live.got, ['r1:1', 'closed:r1'])
      assert.deepEqual(await h.bus.head('k'), { run: 'r1', seq: 1, closed: true })

      const late = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 1 }, late)
      assert.deepEqual(late.got, ['closed:r1'])

      await h.bus.append('k', [ev('r2', 1)], fence)
      assert.deepEqual(await h.bus.head('k'), { run: 'r2', seq: 1, closed: false })
      await eq(h, 'reopened', () => live.got, ['r1:1', 'closed:r1', 'r2:1'])
    })

    test('a closed subscription gets nothing more; drop forgets the stored run', async (t) => {
      const { h, fence } = await start(t)
      const kept = recorder()
      const gone = recorder()
      await h.bus.subscribe('k', {}, kept)
      const sub = await h.bus.subscribe('k', {}, gone)
      sub.close()
      await h.bus.append('k', [ev('r1', 1)], fence)
      // A sentinel after it: the closed subscription would have had the first event before the kept one the
      // sentinel (each batch reaches every subscriber of a session in turn).
      await h.bus.append('k', [ev('r1', 2)], fence)
      await eq(h, 'kept subscriber, up to the sentinel', () => kept.got, ['r1:1', 'r1:2'])
      assert.deepEqual(gone.got, [])
      await h.bus.drop?.('k')
      assert.equal(await h.bus.head('k'), null)
    })

    test('a session over its byte budget keeps its newest events; the oldest are a gap, never reordered', async (t) => {
      const { h, fence } = await start(t)
      const big = (seq: number): BusMessage => ({
        kind: 'event',
        run: 'r1',
        seq,
        type: 'log',
        data: JSON.stringify({ seq, pad: 'p'.repeat(1000) }),
      })
      const live = recorder()
      await h.bus.subscribe('k', {}, live)
      for (let seq = 1; seq <= 20; seq++) await h.bus.append('k', [big(seq)], fence)
      const all = Array.from({ length: 20 }, (_, i) => `r1:${i + 1}`)
      await eq(h, 'every event live, whatever is kept', () => live.got, all)
      const replay = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 0 }, replay)
      const kept = replay.got.length
      assert.ok(kept >= 2 && kept <= 8, `kept ${kept} events of 1 KB in ${BUS_TEST_BYTES} bytes`)
      assert.deepEqual(replay.got, all.slice(20 - kept))
      assert.deepEqual(replay.gaps, [[1, 20 - kept]])
    })

    test('evicted events are reported as a gap before the replay', async (t) => {
      const { h, fence } = await start(t)
      // Redis trims `MAXLEN ~` by whole stream nodes (100 entries): append enough that trimming happens.
      const total = 400
      for (let n = 1; n <= total; n += 50) {
        await h.bus.append(
          'k',
          Array.from({ length: 50 }, (_, i) => ev('r1', n + i)),
          fence,
        )
      }
      const probe = recorder()
      await h.bus.subscribe('k', {}, probe)
      const oldest = Number(probe.got[0]?.split(':')[1])
      assert.ok(oldest > 3, `events were evicted (oldest stored ${oldest})`)
      assert.equal(probe.got.at(-1), `r1:${total}`)

      const behind = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: 2 }, behind)
      assert.deepEqual(behind.gaps, [[3, oldest - 1]])
      assert.deepEqual(behind.got, probe.got)

      const justInTime = recorder()
      await h.bus.subscribe('k', { run: 'r1', after: oldest - 1 }, justInTime)
      assert.deepEqual(justInTime.gaps, [])
      assert.deepEqual(justInTime.got, probe.got)
    })
  })
}
