import assert from 'node:assert/strict'
import { type AddressInfo, connect, createServer, type Socket } from 'node:net'
import { test } from 'node:test'
import type { Redis } from 'ioredis'
import type { BusMessage, Delivery, Subscriber } from '../../src/events/bus.ts'
import {
  deletePrefix,
  REDIS_TEST_URL,
  type ReplicaParts,
  replicaParts,
  uniquePrefix,
  until,
} from './redis-harness.ts'

/** The Redis bus and lease beyond the shared contract: fencing, several replicas, loss of Redis data. */

const ev = (run: string, seq: number): BusMessage => ({
  kind: 'event',
  run,
  seq,
  type: 'log',
  data: JSON.stringify({ seq, type: 'log', ts: 't', log: { level: 'info', msg: `m${seq}` } }),
})
const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Appends events `from` to `to` of run `run` to session `s` through `p`'s bus, with `fence`. */
const appendSeqs = (p: ReplicaParts, fence: number, from: number, to: number): Promise<boolean> =>
  p.bus.append(
    's',
    range(from, to).map((n) => ev('run', n)),
    fence,
  )

/** Records `run:seq` ids and fails loudly on anything out of order. */
function viewer(): Subscriber & { got: string[]; seqs: number[] } {
  const got: string[] = []
  const seqs: number[] = []
  return {
    got,
    seqs,
    deliver(batch: readonly Delivery[]) {
      for (const d of batch) {
        if (d.message.kind !== 'event') continue
        got.push(`${d.message.run}:${d.message.seq}`)
        seqs.push(d.message.seq)
      }
    },
  }
}

async function replicas(t: import('node:test').TestContext, n: number, opts = {}): Promise<ReplicaParts[]> {
  const prefix = uniquePrefix()
  const parts = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      replicaParts(REDIS_TEST_URL, prefix, { name: `${prefix}r${i}`, ...opts }),
    ),
  )
  t.after(async () => {
    await Promise.all(parts.map((p) => p.close()))
    await deletePrefix(REDIS_TEST_URL, prefix)
  })
  return parts
}

test('lease: one holder at a time, fences only rise, a stale owner can neither renew nor append', async (t) => {
  const [a, b] = (await replicas(t, 2, { leaseMs: 1000 })) as [ReplicaParts, ReplicaParts]
  const fa = await a.lease.acquire('s')
  assert.ok(fa !== null)
  assert.equal(await b.lease.acquire('s'), null, 'held by a')
  assert.equal(await a.lease.renew('s', fa), true)
  assert.equal(await a.bus.append('s', [ev('r1', 1)], fa), true)

  // a stalls past its lease (no renewal); b takes over.
  await until('lease expired and taken by b', async () => (await b.lease.acquire('s')) !== null)
  const fb = Number(await b.command.get(b.keys.lease('s')))
  assert.ok(fb > fa, 'the new fence is higher')
  assert.equal(await a.lease.renew('s', fa), false, 'stale renew refused')
  assert.equal(await a.bus.append('s', [ev('r1', 2), ev('r1', 3)], fa), false, 'stale append refused')
  assert.deepEqual(
    await a.bus.head('s'),
    { run: 'r1', seq: 1, closed: false },
    'nothing stored by the stale owner',
  )
  assert.equal(await b.bus.append('s', [ev('r1', 2)], fb), true)

  // A release hands over at once; the next fence is higher still.
  await b.lease.release('s', fb)
  const fa2 = await a.lease.acquire('s')
  assert.ok(fa2 !== null && fa2 > fb)
  assert.equal(await b.bus.append('s', [ev('r1', 3)], fb), false, 'released fence refused')

  // Redis lost everything (restart without persistence): fences keep rising (seeded from Redis TIME).
  await a.command.del(a.keys.lease('s'), a.keys.fence('s'))
  const fb2 = await b.lease.acquire('s')
  assert.ok(fb2 !== null && fb2 > fa2, `fence after loss ${fb2} > ${fa2}`)
  assert.equal(await a.bus.append('s', [ev('r1', 3)], fa2), false)

  // Shutdown: releaseAll gives every lease back and refuses new ones.
  assert.equal(await b.lease.releaseAll(), 1)
  assert.equal(await b.command.exists(b.keys.lease('s')), 0)
  assert.equal(await b.lease.acquire('other'), null)
})

/** Counts the commands `p` sends on lease keys from now on (each a round trip; not what the scripts ran). */
function leaseCommands(p: ReplicaParts): { count: number } {
  const sent = { count: 0 }
  const send = p.command.sendCommand.bind(p.command)
  const leasePrefix = p.keys.lease('').replace('{}', '')
  p.command.sendCommand = ((command, stream) => {
    if (command.args.some((arg) => String(arg).startsWith(leasePrefix))) sent.count++
    return send(command, stream)
  }) as typeof p.command.sendCommand
  return sent
}

test("lease: a turn's acquires and renewals go as one script each; every lease keeps its own answer", async (t) => {
  const [a, b] = (await replicas(t, 2)) as [ReplicaParts, ReplicaParts]
  const ids = range(1, 60).map((n) => `s${n}`)
  const sentA = leaseCommands(a)
  const sentB = leaseCommands(b)
  const fences = await Promise.all(ids.map((id) => a.lease.acquire(id)))
  assert.ok(
    fences.every((f) => f !== null && f > 0),
    'a took all 60',
  )
  assert.equal(sentA.count, 1, 'one script for 60 acquires')
  assert.deepEqual(
    await Promise.all(ids.map((id) => b.lease.acquire(id))),
    ids.map(() => null),
    'held by a, each of them',
  )
  assert.equal(sentB.count, 1)

  // b takes s7 over behind a's back: in a's next batch of renewals that one is lost, the others kept.
  await a.command.del(a.keys.lease('s7'))
  const f7 = (await b.lease.acquire('s7')) as number
  assert.ok(f7 > (fences[6] as number))
  sentA.count = 0
  const kept = await Promise.all(ids.map((id, i) => a.lease.renew(id, fences[i] as number)))
  assert.equal(sentA.count, 1, 'one script for 60 renewals')
  assert.deepEqual(
    kept,
    ids.map((id) => id !== 's7'),
  )
  assert.equal(a.lease.held, 59)
  assert.equal(Number(await a.command.get(a.keys.lease('s7'))), f7, "b's lease untouched")
  // Asked in separate turns, each goes alone (a single lease, a single script).
  sentA.count = 0
  assert.equal(await a.lease.renew('s1', fences[0] as number), true)
  assert.equal(await a.lease.renew('s2', fences[1] as number), true)
  assert.equal(sentA.count, 2)
})

test('lease: a turn of more than 500 asks goes as several scripts; a failed script fails each of its asks', async (t) => {
  const [a] = (await replicas(t, 1)) as [ReplicaParts]
  const ids = range(1, 501).map((n) => `m${n}`)
  const sent = leaseCommands(a)
  const fences = await Promise.all(ids.map((id) => a.lease.acquire(id)))
  assert.ok(fences.every((f) => f !== null))
  assert.equal(sent.count, 2, '500 leases, then 1')
  // Redis cannot be asked: every renewal of the turn throws (the leases may still be alive), none answers.
  a.command.disconnect()
  const renewed = await Promise.allSettled(ids.map((id, i) => a.lease.renew(id, fences[i] as number)))
  assert.deepEqual(
    renewed.filter((r) => r.status === 'fulfilled'),
    [],
  )
  assert.equal(a.lease.held, 501, 'nothing counted as lost before a lease time passed')
})

test('viewers on three replicas joining mid-stream each see every event once, in order', async (t) => {
  const parts = await replicas(t, 3)
  const owner = parts[0] as ReplicaParts
  const sessions = ['s1', 's2', 's3']
  const fences = new Map<string, number>()
  for (const s of sessions) fences.set(s, (await owner.lease.acquire(s)) as number)
  const total = 300
  const watchers: { session: string; from: number; v: ReturnType<typeof viewer> }[] = []

  let next = 1
  let joined = 0
  while (next <= total) {
    const batch = range(next, Math.min(total, next + 9))
    await Promise.all(
      sessions.map((s) =>
        owner.bus.append(
          s,
          batch.map((n) => ev('run', n)),
          fences.get(s)!,
        ),
      ),
    )
    next += batch.length
    // Viewers join on every replica while events flow, some with a position, some without.
    if (next % 30 === 1) {
      for (const s of sessions) {
        const replica = parts[joined++ % parts.length] as ReplicaParts
        const v = viewer()
        const withPosition = joined % 2 === 0 && next > 20
        const from = withPosition ? next - 15 : 0
        await replica.bus.subscribe(s, withPosition ? { run: 'run', after: from } : {}, v)
        watchers.push({ session: s, from, v })
      }
    }
  }
  for (const w of watchers) {
    await until(`viewer of ${w.session} from ${w.from} complete`, () => w.v.seqs.at(-1) === total)
    assert.deepEqual(w.v.seqs, range(w.from + 1, total), `${w.session} from ${w.from}: no gap, no duplicate`)
  }
  assert.ok(watchers.length >= 27)
})

/** Two replicas; a viewer on b that got events 1..50 of `run`, which a appended holding the lease. */
async function viewerOf50(t: import('node:test').TestContext) {
  const [a, b] = (await replicas(t, 2)) as [ReplicaParts, ReplicaParts]
  const live = viewer()
  await b.bus.subscribe('s', {}, live)
  const f1 = (await a.lease.acquire('s')) as number
  await appendSeqs(a, f1, 1, 50)
  await until('first 50', () => live.seqs.at(-1) === 50)
  return { a, b, live }
}

test('after Redis lost the session, the re-read run reaches viewers without a duplicate', async (t) => {
  const { a, b, live } = await viewerOf50(t)

  // What a restart without persistence leaves: no stream, no head, no lease, no fence counter.
  await a.command.del(a.keys.events('s'), a.keys.head('s'), a.keys.lease('s'), a.keys.fence('s'))
  assert.equal(await a.bus.head('s'), null)
  const f2 = (await b.lease.acquire('s')) as number
  // The new owner finds no head, so it reads the run from its start.
  await appendSeqs(b, f2, 1, 80)
  await until('events after the loss', () => live.seqs.at(-1) === 80)
  assert.deepEqual(live.seqs, range(1, 80))

  const resumed = viewer()
  await a.bus.subscribe('s', { run: 'run', after: 50 }, resumed)
  assert.deepEqual(resumed.seqs, range(51, 80))
})

test('a killed live connection reconnects and its viewers miss nothing', async (t) => {
  const [a, b] = (await replicas(t, 2)) as [ReplicaParts, ReplicaParts]
  const v = viewer()
  await b.bus.subscribe('s', {}, v)
  const f = (await a.lease.acquire('s')) as number
  await appendSeqs(a, f, 1, 10)
  await until('first 10', () => v.seqs.length === 10)
  // The live connection only listens: find it by name and kill it from outside.
  const list = String(await a.command.client('LIST'))
  const line = list.split('\n').find((l) => l.includes(`name=${b.keys.prefix}r1:live`))
  const killId = line?.match(/\bid=(\d+)/)?.[1]
  assert.ok(killId, 'live connection listed')
  await a.command.client('KILL', 'ID', killId)
  await appendSeqs(a, f, 11, 40)
  await until('events written while reconnecting', () => v.seqs.at(-1) === 40)
  assert.deepEqual(v.seqs, range(1, 40))
})

test('a publication the live connection missed is read from the stream: no gap, no duplicate', async (t) => {
  const [a, b] = (await replicas(t, 2)) as [ReplicaParts, ReplicaParts]
  const v = viewer()
  await b.bus.subscribe('s', {}, v)
  const f = (await a.lease.acquire('s')) as number
  const append = (from: number, to: number) => appendSeqs(a, f, from, to)
  await append(1, 10)
  await until('first 10', () => v.seqs.length === 10)
  // b's live connection stops hearing the channel behind its loop's back: 11-20 is published to nobody.
  await b.live.unsubscribe(b.keys.live('s'))
  await append(11, 20)
  await b.live.subscribe(b.keys.live('s'))
  assert.equal(b.liveReads.gap, 0)
  await append(21, 30)
  await until('all 30', () => v.seqs.at(-1) === 30)
  assert.deepEqual(v.seqs, range(1, 30))
  assert.equal(b.liveReads.gap, 1, 'the publication of 21-30 showed the gap: one read filled it')
})

test('an unreadable publication on a live channel makes the loop read the stream; nothing is lost or repeated', async (t) => {
  const [a] = (await replicas(t, 1)) as [ReplicaParts]
  const v = viewer()
  await a.bus.subscribe('s', {}, v)
  const f = (await a.lease.acquire('s')) as number
  await appendSeqs(a, f, 1, 5)
  await until('first 5', () => v.seqs.length === 5)
  for (const payload of ['not json', JSON.stringify(['1-1', 'entries']), JSON.stringify({ prev: '0-0' })])
    await a.command.publish(a.keys.live('s'), payload)
  await until('the stream read', () => a.liveReads.gap >= 1)
  await appendSeqs(a, f, 6, 12)
  await until('all 12', () => v.seqs.at(-1) === 12)
  assert.deepEqual(v.seqs, range(1, 12))
})

/**
 * Replicas a and b of one prefix, b with some of its connections through a relay of its own (`through` names
 * which, from the relay's URL), and a viewer of session s on b that has seen 1-10, appended by a with fence f.
 */
async function relayedPair(
  t: import('node:test').TestContext,
  through: (url: string) => Parameters<typeof replicaParts>[2],
) {
  const relay = await tcpRelay(REDIS_TEST_URL)
  t.after(() => relay.close())
  const prefix = uniquePrefix()
  const a = await replicaParts(REDIS_TEST_URL, prefix, { name: `${prefix}r0` })
  const b = await replicaParts(REDIS_TEST_URL, prefix, { name: `${prefix}r1`, ...through(relay.url) })
  t.after(async () => {
    await Promise.all([a.close(), b.close()])
    await deletePrefix(REDIS_TEST_URL, prefix)
  })
  const v = viewer()
  await b.bus.subscribe('s', {}, v)
  const f = (await a.lease.acquire('s')) as number
  await appendSeqs(a, f, 1, 10)
  await until('first 10', () => v.seqs.length === 10)
  return { relay, a, b, v, f }
}

test('a live connection that stops answering is reconnected by its probe and its streams read again', async (t) => {
  const { relay: frozen, a, b, v, f } = await relayedPair(t, (url) => ({ liveUrl: url, probeMs: 200 }))
  // A partition: the socket stays open but nothing crosses it, either way.
  frozen.freeze()
  await appendSeqs(a, f, 11, 20)
  await until('read again after the reconnect', () => b.liveReads.resync >= 1 && v.seqs.at(-1) === 20)
  assert.deepEqual(v.seqs, range(1, 20))
})

/**
 * A TCP relay to Redis whose open connections can be frozen (nothing forwarded either way, nothing closed),
 * or made to hold Redis's replies (commands still reach Redis and run; their answers wait in the relay).
 */
interface TcpRelay {
  readonly url: string
  freeze(): void
  holdReplies(): void
  /** Bytes of replies held now. */
  readonly heldBytes: number
  /** Forwards the held replies, and every later one. */
  releaseReplies(): void
  close(): Promise<void>
}

async function tcpRelay(target: string): Promise<TcpRelay> {
  const { hostname, port } = new URL(target)
  const pairs: [Socket, Socket][] = []
  let holding = false
  let held: { client: Socket; chunk: Buffer }[] = []
  const server = createServer((client) => {
    const upstream = connect(Number(port || 6379), hostname)
    for (const socket of [client, upstream]) socket.on('error', () => {})
    client.on('data', (chunk) => upstream.write(chunk))
    upstream.on('data', (chunk) => {
      if (holding) held.push({ client, chunk })
      else client.write(chunk)
    })
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    pairs.push([client, upstream])
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port: relayPort } = server.address() as AddressInfo
  return {
    url: `redis://127.0.0.1:${relayPort}`,
    freeze() {
      // Paused, not closed: what is sent stays unread in the sockets, and no close is seen.
      for (const [client, upstream] of pairs) {
        client.pause()
        upstream.pause()
      }
    },
    holdReplies() {
      holding = true
    },
    get heldBytes() {
      return held.reduce((n, h) => n + h.chunk.length, 0)
    },
    releaseReplies() {
      holding = false
      for (const { client, chunk } of held) client.write(chunk)
      held = []
    },
    async close() {
      for (const [client, upstream] of pairs) {
        client.destroy()
        upstream.destroy()
      }
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

test('publications that overflow while a stream is read make the loop read it once more: nothing lost', async (t) => {
  const { relay, a, b, v, f } = await relayedPair(t, (url) => ({ commandUrl: url, maxPending: 5 }))
  // 11 is published to nobody, so 12's publication shows b a gap: b reads the stream. Redis runs that read
  // (it finds 11 and 12), but its answer waits in the relay while 13-18 are published one by one: the sixth
  // overflows b's bound of 5 held publications, which leaves none held.
  await b.live.unsubscribe(b.keys.live('s'))
  await appendSeqs(a, f, 11, 11)
  await b.live.subscribe(b.keys.live('s'))
  relay.holdReplies()
  await appendSeqs(a, f, 12, 12)
  await until('the gap read ran in Redis', () => b.liveReads.gap === 1 && relay.heldBytes > 0)
  for (let seq = 13; seq <= 18; seq++) await appendSeqs(a, f, seq, seq)
  // b's live connection answers a PING after every publication Redis sent it before: all six have come.
  await b.live.ping()
  relay.releaseReplies()
  await until('13-18 without a further append', () => v.seqs.at(-1) === 18)
  assert.deepEqual(v.seqs, range(1, 18))
  assert.equal(b.liveReads.gap, 1, 'read again as part of the same read, not found by a later gap')
})

test('a replay longer than one page comes whole; connections stay fixed however many viewers', async (t) => {
  const [a] = (await replicas(t, 1)) as [ReplicaParts]
  const f = (await a.lease.acquire('s')) as number
  for (let n = 1; n <= 2500; n += 500)
    await a.bus.append(
      's',
      range(n, n + 499).map((m) => ev('run', m)),
      f,
    )
  const v = viewer()
  await a.bus.subscribe('s', {}, v)
  assert.deepEqual(v.seqs, range(1, 2500))

  const subs = []
  for (let s = 0; s < 20; s++) {
    for (let i = 0; i < 10; i++) subs.push(await a.bus.subscribe(`many-${s}`, {}, viewer()))
  }
  const list = String(await a.command.client('LIST'))
  const mine = list.split('\n').filter((l) => l.includes(`name=${a.keys.prefix}r0:`))
  assert.equal(
    mine.length,
    2,
    `one command and one live connection for 200 viewers of 20 sessions:\n${mine.join('\n')}`,
  )
  for (const s of subs) s.close()
  await until('loop forgets closed streams', () => a.fanout.watchedCount === 1)
})

/**
 * Holds the answer of the next `xrange` on `redis` until `release` is called: the command ran in Redis (its
 * reply is fixed), but the caller sees it only later, as when the command connection's reply is read after the
 * live connection's publications (two sockets, no order between them).
 */
function holdNextXrange(redis: Redis): { answered: Promise<void>; release: () => void } {
  const original = redis.xrange.bind(redis) as (...args: unknown[]) => Promise<unknown>
  let answered!: () => void
  let release!: () => void
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  const held = async (...args: unknown[]): Promise<unknown> => {
    ;(redis as { xrange: unknown }).xrange = original
    const reply = await original(...args)
    answered()
    await released
    return reply
  }
  ;(redis as { xrange: unknown }).xrange = held
  return {
    answered: new Promise<void>((resolve) => {
      answered = resolve
    }),
    release,
  }
}

test('a viewer resuming after Redis came back empty gets the events re-appended while its join was in flight', async (t) => {
  const { a, b, live } = await viewerOf50(t)

  // Redis restarted empty; b's loop still reads from where it was.
  await a.command.del(a.keys.events('s'), a.keys.head('s'), a.keys.lease('s'), a.keys.fence('s'))
  // A viewer resumes on b with Last-Event-ID run:50: nothing is stored, so its join asks Redis what lies
  // between it and the loop's position. Redis answers (nothing yet); the answer reaches b late.
  const hold = holdNextXrange(b.command)
  const resumed = viewer()
  const joining = b.bus.subscribe('s', { run: 'run', after: 50 }, resumed)
  await hold.answered
  // Meanwhile the new owner re-reads the run and b's loop hands it to the viewers it has.
  const f2 = (await a.lease.acquire('s')) as number
  await appendSeqs(a, f2, 1, 80)
  await until('the loop read the re-appended run', () => live.seqs.at(-1) === 80)
  hold.release()
  await joining
  await a.bus.append('s', [ev('run', 81)], f2)
  await until('the sentinel reached the resumed viewer', () => resumed.seqs.at(-1) === 81)
  assert.deepEqual(resumed.seqs, range(51, 81), 'nothing the loop read during the join is skipped')
})
