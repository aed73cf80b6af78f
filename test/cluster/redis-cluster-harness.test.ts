import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Cluster } from 'ioredis'
import { startRedisCluster } from './redis-cluster-harness.ts'

const SLOTS = 16384

/** CRC16/XMODEM of `key` mod 16384: the slot of a key without a hash tag (Redis Cluster spec, appendix A). */
function slotOf(key: string): number {
  let crc = 0
  for (const byte of Buffer.from(key)) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % SLOTS
}

/** One key for every slot: `k<n>` for the first n that lands in it. */
function keyPerSlot(): string[] {
  const keys: string[] = new Array(SLOTS)
  let found = 0
  for (let n = 0; found < SLOTS; n++) {
    const key = `k${n}`
    const slot = slotOf(key)
    if (keys[slot] === undefined) {
      keys[slot] = key
      found++
    }
  }
  return keys
}

/**
 * The harness itself: 3 masters + 3 replicas, a key written in every slot, a master SIGKILLed. Its replica is
 * promoted, writes to its slot range go on, and every key written before is still there.
 *
 * Redis Cluster replicates asynchronously: a master acknowledges a write before its replica has it, so a
 * write acknowledged just before the SIGKILL may be lost on failover (the spec says so). `WAIT 1 1000` on
 * every master's connection after the writes returns once one replica acknowledged everything that connection
 * wrote; the test checks that it did (1) before the kill, so "nothing lost" is the cluster's guarantee for
 * replicated writes, not luck of timing.
 */
test('Redis Cluster harness: a SIGKILLed master fails over to its replica, keys survive, writes go on', async (t) => {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 })
  t.after(() => cluster.stop())
  const masters = await cluster.masters()
  assert.equal(masters.length, 3)
  assert.equal(masters[0]?.firstSlot, 0)

  const client = new Cluster(
    cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
    // No auto-pipelining: ioredis 5 fails an auto-pipelined batch that comes back MOVED (after a failover)
    // instead of following the new slot map, as it does for single commands.
    { clusterRetryStrategy: (times) => (times > 50 ? null : 100) },
  )
  client.on('error', () => {})
  t.after(() => client.disconnect())

  const keys = keyPerSlot()
  // The key-per-slot table is only right if our slot function is Redis's.
  for (const slot of [0, 1, 5460, 5461, 10922, 10923, 16383]) {
    assert.equal(
      await cluster.node(masters[0]?.port as number).call('CLUSTER', 'KEYSLOT', keys[slot] as string),
      slot,
    )
  }
  await Promise.all(keys.map((key, slot) => client.set(key, `before-${slot}`)))
  const acked = await Promise.all(client.nodes('master').map((m) => m.call('WAIT', 1, 1000)))
  assert.deepEqual(acked, [1, 1, 1], 'every master has a replica that acknowledged its writes')
  const sizes = await Promise.all(masters.map((m) => cluster.node(m.port).dbsize()))
  assert.equal(
    sizes.reduce((a, b) => a + b, 0),
    SLOTS,
  )
  assert.ok(sizes.every((n) => n > 0))

  const victim = masters[0]
  assert.ok(victim)
  // rejoin: the killed node comes back as the new master's replica (the soak fails a range over repeatedly).
  const promoted = await cluster.killMaster(0, { rejoin: true })
  assert.notEqual(promoted.port, victim.port)
  assert.equal(promoted.firstSlot, victim.firstSlot)
  const after = await cluster.masters()
  assert.equal(after.length, 3)
  assert.ok(!after.some((m) => m.port === victim.port))
  assert.deepEqual((await cluster.node(victim.port).role())[0], 'slave')

  // Writes into the failed-over range go on (ioredis follows the new slot map).
  const range = keys.slice(victim.firstSlot, victim.firstSlot + 200)
  await Promise.all(range.map((key) => client.set(key, 'after')))
  assert.equal(await cluster.node(promoted.port).get(range[0] as string), 'after')

  const values = await Promise.all(keys.map((key) => client.get(key)))
  const expected = keys.map((_, slot) =>
    slot >= victim.firstSlot && slot < victim.firstSlot + 200 ? 'after' : `before-${slot}`,
  )
  const wrong = values.flatMap((v, slot) => (v === expected[slot] ? [] : [`${slot}: ${v}`]))
  assert.deepEqual(wrong, [], 'every key written before the kill is readable')
})
