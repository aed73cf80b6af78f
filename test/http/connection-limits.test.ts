import assert from 'node:assert/strict'
import { test } from 'node:test'
import { connectionLimits, REFUSAL_ROOM, readDescriptorLimit } from '../../src/http/connection-limits.ts'

const limits = (soft: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max processes             96367                96367                processes ',
    `Max open files            ${soft.padEnd(20)} 1048576              files     `,
    'Max locked memory         8388608              8388608              bytes     ',
  ].join('\n')

test('the descriptor limit is the soft limit of open files, or null when it cannot be read', () => {
  assert.equal(readDescriptorLimit(limits('20000')), 20_000)
  assert.equal(readDescriptorLimit(limits('unlimited')), null)
  assert.equal(readDescriptorLimit('Limit  Soft Limit\n'), null)
  assert.equal(readDescriptorLimit(null), null)
  // This process's, on Linux: a number.
  if (process.platform === 'linux') assert.equal(typeof readDescriptorLimit(), 'number')
})

test('the cap keeps a tenth of the descriptors, at least 128; the half-open share is a quarter of it', () => {
  assert.deepEqual(connectionLimits({}, 20_000), {
    descriptors: 20_000,
    cap: 18_000,
    halfOpen: 4500,
    hard: 18_000 + REFUSAL_ROOM,
  })
  assert.equal(connectionLimits({}, 512).cap, 384)
  assert.equal(connectionLimits({}, 100).cap, 1, 'never below one')
  assert.equal(connectionLimits({}, null).cap, 1024, 'a fixed cap where the limit is unknown')
})

test('the variables win, and the half-open share is never over the cap', () => {
  const set = connectionLimits(
    { GATEWAY_MAX_CONNECTIONS: 300, GATEWAY_MAX_HALF_OPEN_CONNECTIONS: 20 },
    20_000,
  )
  assert.equal(set.cap, 300)
  assert.equal(set.halfOpen, 20)
  assert.equal(
    connectionLimits({ GATEWAY_MAX_CONNECTIONS: 10, GATEWAY_MAX_HALF_OPEN_CONNECTIONS: 50 }, null).halfOpen,
    10,
  )
  assert.equal(connectionLimits({ GATEWAY_MAX_CONNECTIONS: 2 }, null).halfOpen, 1)
})
