import assert from 'node:assert/strict'
import { lookup } from 'node:dns'
import { test } from 'node:test'
import { Cluster } from 'ioredis'
import { openConnection } from '../../src/cluster/connections.ts'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { loadConfig } from '../../src/config.ts'
import { TEST_ENCRYPTION_KEY } from './cluster-harness.ts'

/** What a Redis Cluster connection is opened with, read back from ioredis (lazy: nothing connects). */

const endpoint = (env: Record<string, string>) => {
  const redis = loadConfig({
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_REDIS_CLUSTER_NODES: 'node-0.example:6379,node-1.example:6379',
    ...env,
  }).redis
  assert.ok(redis)
  return redis
}

test('a Redis Cluster connection: the single connection safety options on every node, no auto-pipelining', () => {
  const redis = endpoint({ REDIS_URL: 'redis://gw:secret@ignored' })
  const open = (role: 'command' | 'live' | 'subscriber') => {
    const c = openConnection({ redis, name: 'krg:test', commandTimeoutMs: 1234 }, role)
    assert.ok(c instanceof Cluster)
    return c.options
  }
  const command = open('command')
  assert.equal(command.enableOfflineQueue, false)
  assert.equal(command.enableAutoPipelining, false)
  assert.equal(command.scaleReads, 'master')
  assert.equal(command.shardedSubscribers, false)
  assert.equal(command.redisOptions?.maxRetriesPerRequest, 0)
  assert.equal(command.redisOptions?.commandTimeout, 1234)
  assert.equal(command.redisOptions?.username, 'gw')
  assert.equal(command.redisOptions?.password, 'secret')
  assert.equal(command.redisOptions?.connectionName, 'krg:test:command')
  assert.equal(command.redisOptions?.tls, undefined)
  assert.equal(command.dnsLookup, lookup, 'without TLS, host names are resolved as usual')
  assert.equal(open('live').shardedSubscribers, true, 'the live channels are sharded')
  assert.equal(open('live').redisOptions?.commandTimeout, undefined)
  assert.equal(open('subscriber').shardedSubscribers, false)
})

test('a Redis Cluster over TLS: host names kept for the certificate (dnsLookup identity), NAT map passed on', async () => {
  const redis = endpoint({
    REDIS_URL: 'rediss://:pw@cluster',
    GATEWAY_REDIS_CLUSTER_NAT_MAP: '{"10.0.0.1:6379":{"host":"node-0.example","port":16379}}',
  })
  const c = openConnection({ redis, name: 'krg:test', commandTimeoutMs: 2000 }, 'command')
  assert.ok(c instanceof Cluster)
  assert.deepEqual(c.options.redisOptions?.tls, {})
  assert.deepEqual(c.options.natMap, { '10.0.0.1:6379': { host: 'node-0.example', port: 16379 } })
  const lookup = c.options.dnsLookup
  assert.ok(lookup)
  const resolved = await new Promise((resolve) =>
    lookup('clustercfg.example.cache.amazonaws.com', (_, a) => resolve(a)),
  )
  assert.equal(resolved, 'clustercfg.example.cache.amazonaws.com')
})

test('keys: hash tags on a Redis Cluster only; with one Redis every name stays as it was', () => {
  const single = clusterKeys('krg:')
  assert.equal(single.hashTagged, false)
  assert.deepEqual(
    [
      single.sessions,
      single.sessionsEpoch,
      single.keyrings,
      single.cookiesOf('ann'),
      single.cookiesOfIdpSession('s1'),
    ],
    [
      'krg:sessions',
      'krg:sessions:epoch',
      'krg:sessions:keyrings',
      'krg:cookies-of:ann',
      'krg:cookies-of-sid:s1',
    ],
  )
  assert.deepEqual(
    [single.streamSlots('ann'), single.chatLinksOf('ann'), single.chatLinksOfIdpSession('s1')],
    ['krg:slots:ann', 'krg:chatlinks-of:ann', 'krg:chatlinks-of-sid:s1'],
  )
  const tagged = clusterKeys('krg:', { hashTagged: true })
  assert.deepEqual(
    [tagged.sessions, tagged.sessionsEpoch, tagged.keyrings, tagged.jobLease('reseal')],
    [
      'krg:{reseal}:sessions',
      'krg:{reseal}:sessions:epoch',
      'krg:{reseal}:sessions:keyrings',
      'krg:job:{reseal}',
    ],
  )
  assert.deepEqual(
    [
      tagged.cookiesOf('ann'),
      tagged.streamSlots('ann'),
      tagged.chatLinksOf('ann'),
      tagged.cookiesOfIdpSession('s1'),
    ],
    ['krg:cookies-of:{ann}', 'krg:slots:{ann}', 'krg:chatlinks-of:{ann}', 'krg:cookies-of-sid:{s1}'],
  )
  // A session's keys are tagged in both layouts (they always were).
  assert.equal(tagged.events('k'), single.events('k'))
})
