import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { pino } from 'pino'
import { type ConnectionRole, openConnection } from '../../src/cluster/connections.ts'
import { RedisHealth } from '../../src/cluster/redis-health.ts'
import { REDIS_TEST_URL, until } from './redis-harness.ts'

function connections(t: TestContext): Record<ConnectionRole, Redis> {
  const settings = {
    redis: { kind: 'url' as const, url: REDIS_TEST_URL },
    name: 'krg-health-test',
    commandTimeoutMs: 1000,
  }
  const opened = {
    command: openConnection(settings, 'command'),
    live: openConnection(settings, 'live'),
    subscriber: openConnection(settings, 'subscriber'),
  }
  t.after(() => {
    for (const c of Object.values(opened)) c.disconnect()
  })
  return opened
}

function capture(): { log: FastifyBaseLogger; lines: { level: number; msg: string; reason?: string }[] } {
  const lines: { level: number; msg: string; reason?: string }[] = []
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) })
  return { log: log as unknown as FastifyBaseLogger, lines }
}

test('a socket Redis has closed is an outage at once, before ioredis reports the close', async (t) => {
  const opened = connections(t)
  const { log, lines } = capture()
  const health = new RedisHealth(opened, log)
  for (const c of Object.values(opened)) await c.connect()
  await until('every connection ready', () => health.state.kind === 'up')
  assert.equal(health.down, false)

  // The moment between the socket's end and ioredis's `close` event: ioredis still says `ready`, but
  // refuses a command as unwriteable. A component that fails there and asks must hear "down".
  opened.command.stream.end()
  assert.equal(opened.command.status, 'ready')
  await assert.rejects(opened.command.ping(), /Stream isn't writeable/)
  assert.equal(health.down, true)
  const warnings = () => lines.filter((l) => l.level >= 40)
  assert.deepEqual(
    warnings().map((l) => l.msg),
    ['redis unavailable: serving what needs no redis (degraded) until it is back'],
  )
  assert.ok(warnings()[0]?.reason)

  // The close that follows, and the reconnect, change nothing more than the one return line.
  await until('back', () => health.state.kind === 'up')
  assert.equal(warnings().length, 1, 'the close after the end is the same outage')
  assert.deepEqual(
    lines.filter((l) => l.msg === 'redis available again').length,
    1,
    'the return is logged once',
  )
  assert.equal(health.down, false)
})

test('while every connection is ready and writeable, asking changes nothing', async (t) => {
  const opened = connections(t)
  const { log, lines } = capture()
  const health = new RedisHealth(opened, log)
  assert.equal(health.down, false, 'connecting since boot is not an outage')
  for (const c of Object.values(opened)) await c.connect()
  await until('every connection ready', () => health.state.kind === 'up')
  for (let i = 0; i < 3; i++) assert.equal(health.down, false)
  assert.equal(await opened.command.ping(), 'PONG')
  assert.deepEqual(lines, [])
})
