import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseClusterOptions } from '../../bench/cluster/options.ts'
import { shares } from '../../bench/cluster/runtime-pool.ts'
import { perEvent, type Scenario, tables, verdicts } from '../../bench/cluster/verdicts.ts'

function scenario(over: Partial<Scenario>): Scenario {
  return {
    sessions: 50,
    replicas: 3,
    viewers: 100,
    upstreamStreams: 50,
    sessionEvents: 1500,
    expected: 3000,
    delivered: 3000,
    p50Ms: 2,
    p99Ms: 10,
    maxMs: 20,
    overviewFrames: 0,
    phaseS: 30,
    replicaCpuS: 3,
    redisCpuS: 0.3,
    redisCommands: 15_000,
    idle: { replicaCpuPerS: 0, redisCpuPerS: 0, redisCommandsPerS: 0 },
    memKiBPerWatchedSession: 20,
    benchCpuS: 1,
    runQueueWait: { replicas: 120.4, redis: 60, bench: 250.6 },
    phase: { from: 1_000_000, to: 1_030_000 },
    loadBefore: 0.5,
    loadAfter: 1,
    perCommand: {},
    byReplica: [
      { leases: 50, p99Ms: 11 },
      { leases: 0, p99Ms: 9 },
    ],
    ...over,
  }
}

test('cluster bench options: defaults are the issue 28 run, the quick mode and --redis-cluster parse', () => {
  const d = parseClusterOptions([])
  assert.deepEqual(d.sessions, [50, 500, 2000])
  assert.equal(d.replicas, 3)
  assert.equal(d.rate, 1)
  assert.equal(d.runtimes, 200)
  assert.equal(d.runtimeProcesses, 4)
  assert.equal(parseClusterOptions(['--runtime-processes', '2']).runtimeProcesses, 2)
  assert.throws(() => parseClusterOptions(['--runtime-processes', '0']))
  // 50 runtimes over 4 processes: 13, 13, 12, 12, each knowing its place; never more processes than runtimes.
  assert.deepEqual(shares(50, 4), [
    { first: 0, count: 13 },
    { first: 13, count: 13 },
    { first: 26, count: 12 },
    { first: 38, count: 12 },
  ])
  assert.deepEqual(shares(2, 4), [
    { first: 0, count: 1 },
    { first: 1, count: 1 },
  ])
  assert.equal(d.redisCluster, false)
  const q = parseClusterOptions(['--sessions', '200,50', '--seconds', '10', '--redis-cluster'])
  assert.deepEqual(q.sessions, [50, 200], 'sorted: the smallest is the anchor')
  assert.equal(q.seconds, 10)
  assert.equal(q.redisCluster, true)
  assert.equal(parseClusterOptions(['--out', '/tmp/x.md']).out, '/tmp/x.md')
  assert.deepEqual(parseClusterOptions(['--node-args', '--trace-gc  --import ./probe.mjs']).nodeArgs, [
    '--trace-gc',
    '--import',
    './probe.mjs',
  ])
})

test('cluster bench options: what is out of bounds or unknown is refused naming the option', () => {
  assert.throws(() => parseClusterOptions(['--sessions', '50,99999']), /--sessions/)
  assert.throws(() => parseClusterOptions(['--sessions', '1,2,3,4,5,6,7']), /at most 6/)
  assert.throws(() => parseClusterOptions(['--seconds', 'x']), /--seconds/)
  assert.throws(() => parseClusterOptions(['--replicas', '0']), /--replicas/)
  assert.throws(() => parseClusterOptions(['--out']), /--out/)
  assert.throws(() => parseClusterOptions(['--node-args', 'trace-gc']), /--node-args/)
  assert.throws(() => parseClusterOptions(['--node-args', '']), /--node-args/)
  assert.throws(() => parseClusterOptions(['--viewers', '10']), /unknown option --viewers/)
})

test('cluster bench figures per event divide by deliveries and by session events', () => {
  const e = perEvent(scenario({}))
  assert.equal(e.replicaCpuUsPerDelivery, 1000)
  assert.equal(e.replicaCpuUsPerEvent, 2000)
  assert.equal(e.redisCpuUsPerEvent, 200)
  assert.equal(e.redisCommandsPerEvent, 10)
  assert.ok(Number.isNaN(perEvent(scenario({ delivered: 0 })).replicaCpuUsPerDelivery))
  // The idle cost over the phase is not per event: 0.05 CPU-s a second for 30 s leaves 1.5 of the 3 CPU-s.
  const idle = perEvent(
    scenario({ idle: { replicaCpuPerS: 0.05, redisCpuPerS: 0.01, redisCommandsPerS: 250 } }),
  )
  assert.equal(idle.replicaCpuUsPerDelivery, 500)
  assert.equal(idle.replicaCpuUsPerDeliveryTotal, 1000)
  assert.ok(Math.abs(idle.redisCpuUsPerEvent - 0) < 1e-9)
  assert.equal(idle.redisCommandsPerEvent, 5)
})

test('cluster bench verdicts: ratios to the smallest run, each target at its bound, loss fails', () => {
  const anchor = scenario({})
  // 40x the sessions and deliveries: CPU per delivery 1.5x (at the bound), p99 1.6x, Redis CPU per event 1.3x.
  const big = scenario({
    sessions: 2000,
    upstreamStreams: 2000,
    sessionEvents: 60_000,
    expected: 120_000,
    delivered: 120_000,
    replicaCpuS: 180,
    p99Ms: 16,
    redisCpuS: 15.6,
  })
  const got = verdicts([big, anchor])
  const of = (sessions: number, target: string) =>
    got.find((v) => v.sessions === sessions && v.target === target)
  assert.equal(got.filter((v) => v.sessions === 50).length, 1, 'the anchor is only checked for loss')
  assert.equal(of(2000, 'replica CPU per delivered event')?.pass, true)
  assert.ok(Math.abs((of(2000, 'replica CPU per delivered event')?.ratio ?? 0) - 1.5) < 1e-9)
  assert.equal(of(2000, 'p99 delivery delay')?.pass, false)
  assert.equal(of(2000, 'Redis CPU per event')?.pass, true)
  assert.equal(of(2000, 'every event delivered, one reader per session')?.pass, true)

  const lossy = verdicts([anchor, { ...big, delivered: 119_999 }])
  assert.equal(lossy.find((v) => v.sessions === 2000 && v.target.startsWith('every'))?.pass, false)
  const twoReaders = verdicts([anchor, { ...big, upstreamStreams: 2001 }])
  assert.equal(twoReaders.find((v) => v.sessions === 2000 && v.target.startsWith('every'))?.pass, false)
  // A figure that was not measured cannot pass.
  const unmeasured = verdicts([
    anchor,
    { ...big, redisCpuS: 0 },
    { ...anchor, sessions: 500, p99Ms: Number.NaN },
  ])
  assert.equal(unmeasured.find((v) => v.sessions === 500 && v.target === 'p99 delivery delay')?.pass, false)

  const md = tables([anchor, big]).join('\n')
  assert.match(md, /\| 2000 \| p99 delivery delay \| 1\.60x \| 1\.5x \| FAIL \|/)
  assert.match(md, /\| 2000 \| replica CPU per delivered event \| 1\.50x \| 1\.5x \| pass \|/)
  // Each replica's leases and its viewers' p99, in start order, end the scenario's row.
  assert.match(md, /\| per replica: leases held, p99 ms of its viewers \|\n/)
  assert.match(md, /^\| 50 \| 3 \|.* \| 50, 11\.00; 0, 9\.00 \|$/m)
  // The main threads' mean wait for a CPU per wake-up, replicas, Redis, bench: contention on the shared cores.
  assert.match(md, /\| µs waited for a CPU per wake-up: replicas, Redis, bench \|/)
  assert.match(md, /^\| 50 \| 3 \|.* \| 120, 60, 251 \| 0\.50 \/ 1\.00 \|/m)
})
