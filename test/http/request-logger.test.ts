import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyBaseLogger } from 'fastify'
import { pino } from 'pino'
import { lazyChildLogger } from '../../src/http/request-logger.ts'

function capture(level: string): { parent: FastifyBaseLogger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = []
  const parent = pino(
    { level, redact: { paths: ['*.token'], censor: '[redacted]' } },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  ) as unknown as FastifyBaseLogger
  return { parent, lines }
}

test('a request logger writes what its level allows, with its bindings, redacted', () => {
  const { parent, lines } = capture('warn')
  const log = lazyChildLogger(parent, { reqId: 'r-1' }, {})
  log.info('not at warn')
  log.debug('nor this')
  assert.equal(lines.length, 0)
  log.warn({ detail: { token: 'secret' } }, 'written')
  assert.equal(lines.length, 1)
  assert.equal(lines[0]?.reqId, 'r-1')
  assert.equal(lines[0]?.msg, 'written')
  assert.deepEqual(lines[0]?.detail, { token: '[redacted]' })
  assert.equal(log.level, 'warn')
  assert.equal((log as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled('info'), false)
})

test("a request logger's own level and children are its pino child's", () => {
  const { parent, lines } = capture('warn')
  const log = lazyChildLogger(parent, { reqId: 'r-2' }, {})
  log.level = 'debug'
  log.debug('now written')
  assert.equal(parent.level, 'warn', 'the parent keeps its level')
  log.child({ part: 'upload' }).warn('from a child')
  assert.deepEqual(
    lines.map((l) => [l.reqId, l.msg, l.part]),
    [
      ['r-2', 'now written', undefined],
      ['r-2', 'from a child', 'upload'],
    ],
  )
})
