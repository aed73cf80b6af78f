import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { Redis } from 'ioredis'
import pino from 'pino'
import { LeasedJob } from '../../src/cluster/job-lease.ts'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { RedisReaderLease } from '../../src/cluster/reader-lease.ts'
import { MemoryReaderLease } from '../../src/events/memory-bus.ts'
import { deletePrefix, REDIS_TEST_URL, replicaParts, uniquePrefix, until } from './redis-harness.ts'

/** A job one replica runs at a time, over the cluster's fenced lease. */

const log = pino({ level: 'silent' })

interface Runner {
  job: LeasedJob
  runs: number[]
  aborted: number
}

async function replicas(
  t: TestContext,
  n: number,
  leaseMs: number,
  runMs = 0,
  prefix = uniquePrefix(),
): Promise<Runner[]> {
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const out: Runner[] = []
  for (let i = 0; i < n; i++) {
    const parts = await replicaParts(REDIS_TEST_URL, prefix, { leaseMs, name: `${prefix}job-${i}` })
    t.after(() => parts.close())
    const runner: Runner = { job: undefined as unknown as LeasedJob, runs: [], aborted: 0 }
    const lease = new RedisReaderLease({
      command: parts.command,
      keys: parts.keys,
      leaseMs,
      keyspace: { lease: parts.keys.jobLease, fence: parts.keys.jobFence },
    })
    runner.job = new LeasedJob({
      name: 'sync',
      lease,
      leaseMs,
      nextRunMs: () => 50,
      log,
      run: async ({ fence, signal }) => {
        runner.runs.push(fence)
        if (runMs === 0) return
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, runMs)
          signal.addEventListener('abort', () => {
            runner.aborted++
            clearTimeout(timer)
            resolve()
          })
        })
      },
    })
    t.after(() => runner.job.stop())
    out.push(runner)
  }
  return out
}

test('of several replicas exactly one runs the job; on a clean stop another takes over at once', async (t) => {
  const prefix = uniquePrefix()
  const [a, b, c] = (await replicas(t, 3, 3000, 0, prefix)) as [Runner, Runner, Runner]
  for (const r of [a, b, c]) r.job.start()
  await until('someone runs the job', () => [a, b, c].some((r) => r.runs.length >= 3))
  const leaders = [a, b, c].filter((r) => r.job.leading)
  assert.equal(leaders.length, 1)
  assert.deepEqual(
    [a, b, c].filter((r) => r.runs.length > 0),
    leaders,
    'nobody else ever ran it',
  )
  const first = leaders[0] as Runner
  const fence = first.runs[0] as number
  await first.job.stop()
  // Given back, not left to expire, so it is taken at the next retry (half a lease): the key is gone, or a new
  // holder's already. Redis says so however slow the machine (a slow one could only hide a lease left behind).
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  const held = await redis.get(clusterKeys(prefix).jobLease('sync'))
  assert.ok(held === null || Number(held) > fence, `the stopped holder's fence ${held} is still there`)
  const rest = [a, b, c].filter((r) => r !== first)
  await until('another replica runs the job', () => rest.some((r) => r.runs.length > 0))
  const next = rest.find((r) => r.runs.length > 0) as Runner
  assert.ok((next.runs[0] as number) > fence, 'the new holder has a higher fence')
  assert.equal(rest.filter((r) => r.job.leading).length, 1)
})

test('a holder whose lease is taken away aborts its run and stops running the job', async (t) => {
  const prefix = uniquePrefix()
  const [a, b] = (await replicas(t, 2, 1500, 60_000, prefix)) as [Runner, Runner]
  a.job.start()
  await until('a runs', () => a.runs.length === 1)
  b.job.start()
  // What a pause past the lease looks like from Redis: someone else holds the lease now.
  const { Redis } = await import('ioredis')
  const redis = new Redis(REDIS_TEST_URL)
  t.after(() => redis.disconnect())
  const key = `${prefix}job:{sync}`
  assert.equal(await redis.set(key, '1', 'PX', 60_000, 'XX'), 'OK')
  await until('a aborted its run', () => a.aborted === 1)
  assert.equal(a.job.leading, false)
  assert.equal(b.job.leading, false)
  // When that holder is gone, one of them takes over with a higher fence.
  await redis.del(key)
  await until('someone runs again', () => a.runs.length + b.runs.length === 2)
  const latest = [...a.runs, ...b.runs].sort((x, y) => x - y)
  assert.ok((latest[1] as number) > (latest[0] as number))
  assert.equal([a, b].filter((r) => r.job.leading).length, 1)
})

test('embedded: the memory lease always grants, the job runs on its schedule and stops', async () => {
  let runs = 0
  let failures = 0
  const job = new LeasedJob({
    name: 'sync',
    lease: new MemoryReaderLease(),
    leaseMs: 1000,
    nextRunMs: (n) => {
      failures = n
      return 10
    },
    log,
    run: async () => {
      runs++
      if (runs === 2) throw new Error('Kasm down')
    },
  })
  job.start()
  await until('three runs', () => runs >= 3)
  assert.equal(job.leading, true)
  await job.stop()
  assert.equal(job.leading, false)
  assert.equal(failures, 0, 'the run after the failure reset the count')
})
