import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MemoryAuditLog } from '../../src/audit/memory-log.ts'
import type { AuditRecord } from '../../src/audit/types.ts'

const rec = (n: number, over: Partial<AuditRecord> = {}): AuditRecord => ({
  at: new Date(1_800_000_000_000 + n).toISOString(),
  requestId: `req-${n}`,
  sub: 'alice',
  kasmId: 'k1',
  method: 'POST',
  route: 'messages',
  outcome: 'forwarded',
  status: 202,
  latencyMs: 1,
  ...over,
})

test('keeps the last N records, newest first, up to limit', async () => {
  const log = new MemoryAuditLog(3)
  assert.deepEqual(await log.recent({ limit: 10 }), [])
  log.record(rec(1))
  log.record(rec(2))
  assert.deepEqual(
    (await log.recent({ limit: 10 })).map((r) => r.requestId),
    ['req-2', 'req-1'],
  )
  for (const n of [3, 4, 5, 6, 7]) log.record(rec(n))
  assert.deepEqual(
    (await log.recent({ limit: 10 })).map((r) => r.requestId),
    ['req-7', 'req-6', 'req-5'],
  )
  assert.deepEqual(
    (await log.recent({ limit: 2 })).map((r) => r.requestId),
    ['req-7', 'req-6'],
  )
})

test('filters by kasmId and sub before applying the limit', async () => {
  const log = new MemoryAuditLog(100)
  for (let n = 1; n <= 20; n++)
    log.record(rec(n, { kasmId: n % 2 ? 'odd' : 'even', sub: n % 5 ? 'alice' : null }))
  assert.deepEqual(
    (await log.recent({ limit: 3, kasmId: 'odd' })).map((r) => r.requestId),
    ['req-19', 'req-17', 'req-15'],
  )
  assert.deepEqual(
    (await log.recent({ limit: 10, sub: 'alice', kasmId: 'even' })).map((r) => r.requestId),
    ['req-18', 'req-16', 'req-14', 'req-12', 'req-8', 'req-6', 'req-4', 'req-2'],
  )
  assert.deepEqual(await log.recent({ limit: 10, sub: 'nobody' }), [])
})

test('refuses a capacity that is not a positive integer', () => {
  assert.throws(() => new MemoryAuditLog(0), RangeError)
  assert.throws(() => new MemoryAuditLog(1.5), RangeError)
})
