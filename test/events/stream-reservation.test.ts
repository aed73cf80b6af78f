import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Operator } from '../../src/auth/operator.ts'
import { StreamReservation } from '../../src/events/stream-reservation.ts'
import { MemoryStreamSlots } from '../../src/events/stream-slots.ts'

const alice: Operator = {
  sub: 'alice',
  roles: new Set(['viewer']),
  teams: new Set(['*']),
  via: 'bearer',
  expiresAt: Date.now() + 3_600_000,
}

test('a reservation released twice gives back one slot, never another stream’s', async () => {
  const slots = new MemoryStreamSlots(2)
  const first = await StreamReservation.take(slots, alice, 2)
  await StreamReservation.take(slots, alice, 2)
  // The route's failure path and the stream's end may both release the same reservation.
  first.release()
  first.release()
  assert.equal(first.held, false)
  await StreamReservation.take(slots, alice, 2)
  await assert.rejects(StreamReservation.take(slots, alice, 2), { code: 'TOO_MANY_STREAMS', statusCode: 429 })
})
