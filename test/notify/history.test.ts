import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { Registry } from 'prom-client'
import { Escalations } from '../../src/escalation/engine.ts'
import { Fanout } from '../../src/escalation/fanout.ts'
import { createEscalationMetrics } from '../../src/escalation/metrics.ts'
import { MemoryEventBus, MemoryReaderLease } from '../../src/events/memory-bus.ts'
import type { OutboxJob } from '../../src/notify/outbox.ts'
import { NotifyWatcher } from '../../src/notify/watcher.ts'
import { MemorySessionStore } from '../../src/sessions/memory-store.ts'
import { StoreSessionRegistry } from '../../src/sessions/registry.ts'
import { MemoryBoard } from '../../src/summary/board.ts'
import { SessionSummaries } from '../../src/summary/summaries.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * A reader's first connection gets the run's whole replay buffer: what happened long ago is history. The real
 * bus, summaries and registry; the watcher's outbox is a list. Only what is still open is notified, and what
 * happens now is notified as it happens.
 */
test('history is not notified, except the question and the handoff still open; live events are', async (t) => {
  const log = pino({ level: 'silent' })
  const bus = new MemoryEventBus({ capacity: 100, maxBytes: 1 << 20, totalBytes: 1 << 22 })
  const fence = await new MemoryReaderLease().acquire('k1')
  const summaries = new SessionSummaries({ bus, retain: () => () => {}, board: new MemoryBoard(), log })
  const sessions = new StoreSessionRegistry(new MemorySessionStore())
  await sessions.put({
    kasmId: 'k1',
    upstream: 'http://runtime.test/',
    team: 'blue',
    messagingToken: 'a-token',
    source: 'admin',
  })
  const jobs: OutboxJob[] = []
  const target = { url: 'https://hooks.test/', format: 'json' as const, secret: null, label: 'hooks.test' }
  const routes = () => ({ global: [target], teams: new Map() })
  const escalations = new Escalations({
    board: new MemoryBoard(),
    reading: () => true,
    routes,
    chat: false,
    fanout: new Fanout({
      routes,
      send: (job) => jobs.push(job),
      links: null,
      link: (kasmId) => `/sessions/${kasmId}`,
    }),
    claimTtlMs: 90_000,
    metrics: createEscalationMetrics(new Registry()),
    log,
  })
  const watcher = new NotifyWatcher({
    summaries,
    sessions,
    reading: () => true,
    escalations,
    chat: false,
    routes,
    pendingMs: 6000,
    log,
  })
  t.after(async () => {
    watcher.close()
    await summaries.close()
    await bus.close()
  })
  await watcher.syncAll()
  assert.equal(watcher.watched, 1)

  let seq = 0
  const event = (type: string, ts: Date, body: Record<string, unknown>) => ({
    kind: 'event' as const,
    run: 'r1',
    seq: ++seq,
    type,
    data: JSON.stringify({ seq, type, ts: ts.toISOString(), ...body }),
  })
  const hourAgo = new Date(Date.now() - 3600_000)
  const later = new Date(Date.now() + 3600_000).toISOString()
  const request = (id: string, state: string, extra: Record<string, unknown> = {}) => ({
    request: {
      request_id: id,
      state,
      title: id,
      deadline: later,
      fields: [{ id: 'x', type: 'string' }],
      ...extra,
    },
  })
  await bus.append(
    'k1',
    [
      event('request', hourAgo, request('q-answered', 'open')),
      event('request', hourAgo, request('q-answered', 'closed', { closed_by: 'reply' })),
      event('request', hourAgo, request('q-open', 'open')),
      event('iteration', hourAgo, {
        iteration: { tool_calls: [{ name: 'escalate', args: { reason: 'stuck' } }] },
      }),
    ],
    fence,
  )
  await waitFor('the still-open question and handoff', () => jobs.length === 2)
  assert.deepEqual(
    jobs.map((j) => [j.notification.type, j.notification.request?.request_id]),
    [
      ['request.opened', 'q-open'],
      ['escalation.started', undefined],
    ],
  )

  // Now: the open question is answered, a new one opens; both are notified.
  await bus.append(
    'k1',
    [
      event('request', new Date(), request('q-open', 'closed', { closed_by: 'reply' })),
      event('request', new Date(), request('q-new', 'open')),
    ],
    fence,
  )
  await waitFor('the live transitions', () => jobs.length === 4)
  assert.deepEqual(
    jobs.slice(2).map((j) => [j.notification.type, j.notification.request?.request_id]),
    [
      ['request.closed', 'q-open'],
      ['request.opened', 'q-new'],
    ],
  )
})
