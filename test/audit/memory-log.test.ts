import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MemoryAuditLog } from '../../src/audit/memory-log.ts'
import { auditTarget } from '../../src/audit/target.ts'
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

test('the audit target comes from fixed names, never from URL text', () => {
  const cases: Array<[string, string, ReturnType<typeof auditTarget>]> = [
    ['POST', '/desktop/k1/mcp/messages', { kasmId: 'k1', route: 'messages' }],
    ['POST', '/desktop/k1/mcp/messages?x=1', { kasmId: 'k1', route: 'messages' }],
    ['POST', '/desktop/k1/mcp/actions', { kasmId: 'k1', route: 'actions' }],
    ['POST', '/desktop/k1/mcp/attachments', { kasmId: 'k1', route: 'attachments' }],
    ['POST', '/desktop/k1/mcp/requests/q1/cancel', { kasmId: 'k1', route: 'requests/cancel' }],
    ['POST', '/desktop/k1/mcp/runs/r1/messages/key', { kasmId: 'k1', route: 'runs/messages' }],
    ['POST', '/desktop/k1/mcp/<script>', { kasmId: 'k1', route: 'unknown' }],
    ['POST', '/desktop/bad%20id/mcp/messages', { kasmId: null, route: 'messages' }],
    ['POST', '/desktop/', { kasmId: null, route: 'unknown' }],
    ['PUT', '/admin/sessions/k9', { kasmId: 'k9', route: 'admin/sessions' }],
    ['DELETE', '/admin/sessions/k..9', { kasmId: null, route: 'admin/sessions' }],
    ['POST', '/admin/whatever', { kasmId: null, route: 'admin/unknown' }],
    ['GET', '/desktop/k1/mcp/messages', null],
    ['HEAD', '/admin/sessions', null],
    ['OPTIONS', '/desktop/k1/mcp/messages', null],
    ['POST', '/auth/login', null],
    ['POST', '/desktopx/k1', null],
  ]
  for (const [method, url, expected] of cases)
    assert.deepEqual(auditTarget(method, url), expected, `${method} ${url}`)
})
