import assert from 'node:assert/strict'
import { BUS_TEST_BYTES, busContract, memoryHarness } from '../events/bus-contract.ts'
import { deletePrefix, REDIS_TEST_URL, replicaParts, uniquePrefix } from './redis-harness.ts'

/**
 * The event-bus contract (test/events/bus-contract.ts), run against both buses: embedded mode and cluster
 * mode must behave the same for the viewer. Redis delivers live events through its live channels, so its
 * scenarios wait for them, and for a sentinel event (never a pause) before asserting that nothing else came.
 */

busContract('memory', memoryHarness)

busContract('redis', async () => {
  const prefix = uniquePrefix()
  const parts = await replicaParts(REDIS_TEST_URL, prefix, { maxLen: 16, maxBytes: BUS_TEST_BYTES })
  const fences = new Map<string, number>()
  return {
    bus: parts.bus,
    synchronous: false,
    async fence(k) {
      const held = fences.get(k)
      if (held !== undefined) return held
      const f = await parts.lease.acquire(k)
      assert.ok(f !== null)
      fences.set(k, f)
      return f
    },
    async close() {
      await parts.close()
      await deletePrefix(REDIS_TEST_URL, prefix)
    },
  }
})
