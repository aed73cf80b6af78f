import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import type { AuditRecord } from '../../src/audit/types.ts'
import type { CookieSessionRecord } from '../../src/auth/cookie-store.ts'
import { RedisAuditLog } from '../../src/cluster/audit-log.ts'
import { ChangeFeed } from '../../src/cluster/change-feed.ts'
import { openConnection, waitReady } from '../../src/cluster/connections.ts'
import { RedisCookieStore } from '../../src/cluster/cookie-store.ts'
import { clusterKeys } from '../../src/cluster/keys.ts'
import { RedisPresence, type WatchingViewer } from '../../src/cluster/presence.ts'
import { RedisReaderLease } from '../../src/cluster/reader-lease.ts'
import { defineScripts } from '../../src/cluster/scripts.ts'
import { RedisSessionStore } from '../../src/cluster/session-store.ts'
import { toErrorBody } from '../../src/errors.ts'
import { Secret } from '../../src/sessions/secret.ts'
import { TokenVault } from '../../src/sessions/token-vault.ts'
import type { Session } from '../../src/sessions/types.ts'
import { WAIT_MS } from '../helpers/wait.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix, until } from './redis-harness.ts'

const KEY = 'Q2x1c3Rlci10ZXN0LWtleS0zMi1ieXRlcy1sb25nISE'
const OTHER_KEY = 'T3RoZXItdGVzdC1rZXktMzItYnl0ZXMtbG9uZy4uLi4'
const log = pino({ level: 'silent' })

let named = 0
async function connection(
  t: import('node:test').TestContext,
  role: 'command' | 'subscriber',
  url = REDIS_TEST_URL,
) {
  const c = openConnection(
    { redis: { kind: 'url', url }, name: `krgtest-${process.pid}-${++named}`, commandTimeoutMs: 2000 },
    role,
  )
  c.on('error', () => {})
  c.connect().catch(() => {})
  t.after(() => c.disconnect())
  await waitReady(c, WAIT_MS)
  return c
}

function prefixFor(t: import('node:test').TestContext): string {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  return prefix
}

/** A replica's session store: its own command and subscriber connections. */
async function sessionStore(t: import('node:test').TestContext, prefix: string, key = KEY, replicaId = 'r') {
  const command = await connection(t, 'command')
  const subscriber = await connection(t, 'subscriber')
  const store = new RedisSessionStore({
    command: defineScripts(command),
    feed: new ChangeFeed(subscriber, log),
    keys: clusterKeys(prefix),
    vault: TokenVault.fromBase64url(key),
    replicaId,
    log,
  })
  t.after(() => store.close())
  await store.start()
  return { store, command, subscriber }
}

/** Drops `victim`'s connection from the server side (it reconnects by itself). */
async function kill(command: import('ioredis').Redis, victim: import('ioredis').Redis): Promise<void> {
  const name = victim.options.connectionName
  const line = String(await command.client('LIST'))
    .split('\n')
    .find((l) => l.includes(`name=${name} `))
  const id = line?.match(/\bid=(\d+)/)?.[1]
  assert.ok(id, `connection ${name} listed`)
  await command.client('KILL', 'ID', id)
}

const session = (kasmId: string, token: string, version = 1): Session => ({
  kasmId,
  upstream: 'http://127.0.0.1:9/',
  team: 'blue',
  messagingToken: new Secret(token),
  source: 'admin',
  version,
})

test('session store: a write on one replica reaches the others, the token only encrypted in Redis', async (t) => {
  const prefix = prefixFor(t)
  const a = await sessionStore(t, prefix, KEY, 'a')
  const b = await sessionStore(t, prefix, KEY, 'b')
  const heardA: string[] = []
  const heardB: string[] = []
  a.store.subscribe((id) => heardA.push(id))
  b.store.subscribe((id) => heardB.push(id))

  await a.store.put(session('s1', 'token-one-secret'))
  assert.deepEqual(heardA, ['s1'], 'the writer hears its own change at once')
  await until('replica b heard', () => heardB.length === 1)
  const seen = await b.store.get('s1')
  assert.ok(seen?.messagingToken.equals(new Secret('token-one-secret')))
  assert.equal(seen?.version, 1)
  assert.equal(b.store.peek('s1'), seen, 'held without waiting once heard')
  // A store not loaded yet holds nothing: the request path then waits for `get`.
  const unloaded = new RedisSessionStore({
    command: defineScripts(await connection(t, 'command')),
    feed: new ChangeFeed(await connection(t, 'subscriber'), log),
    keys: clusterKeys(prefix),
    vault: TokenVault.fromBase64url(KEY),
    replicaId: 'u',
    log,
  })
  assert.equal(unloaded.peek('s1'), undefined)
  assert.equal((await unloaded.get('s1'))?.version, 1)
  assert.equal(unloaded.peek('s1')?.version, 1, 'held once loaded')
  await unloaded.close()
  const raw = await a.command.hget(`${prefix}sessions`, 's1')
  assert.ok(raw && !raw.includes('token-one-secret'))

  // An unchanged rewrite is not a change for the others; a rotation is.
  await a.store.put(session('s1', 'token-one-secret'))
  await a.store.put(session('s1', 'token-two-secret', 2))
  await until('replica b heard the rotation', () => heardB.length === 2)
  assert.ok((await b.store.get('s1'))?.messagingToken.equals(new Secret('token-two-secret')))
  assert.ok(b.store.peek('s1')?.messagingToken.equals(new Secret('token-two-secret')))

  assert.equal(await b.store.remove('s1'), true)
  await until('replica a heard the removal', () => heardA.at(-1) === 's1' && heardA.length === 4)
  assert.equal(await a.store.get('s1'), undefined)
  assert.equal(a.store.peek('s1'), undefined)
  assert.equal(await b.store.remove('s1'), false)
  await a.store.ready()
})

test('session store: a wrong key leaves the replica not ready instead of serving garbage', async (t) => {
  const prefix = prefixFor(t)
  const good = await sessionStore(t, prefix, KEY)
  await good.store.put(session('s1', 'token-one-secret'))
  const wrong = await sessionStore(t, prefix, OTHER_KEY, 'w')
  assert.equal(await wrong.store.get('s1'), undefined)
  await assert.rejects(wrong.store.ready(), /cannot be decrypted/)
})

test('session store: after Redis lost its data, the registry is written back from memory', async (t) => {
  const prefix = prefixFor(t)
  const a = await sessionStore(t, prefix, KEY, 'a')
  await a.store.put(session('s1', 'token-one-secret'))
  await a.store.put(session('s2', 'token-two-secret'))
  const removed: string[] = []
  a.store.subscribe((id) => removed.push(id))
  // What a restart without persistence leaves, then the reconnect that follows it.
  await a.command.del(`${prefix}sessions`, `${prefix}sessions:epoch`)
  await kill(a.command, a.subscriber)
  await until('registry restored', async () => (await a.command.hlen(`${prefix}sessions`)) === 2)
  assert.ok(await a.command.exists(`${prefix}sessions:epoch`))
  assert.equal(removed.length, 0, 'no session was announced as removed')
  // With the epoch present, an emptied hash means sessions were removed: not restored.
  await a.command.hdel(`${prefix}sessions`, 's2')
  await kill(a.command, a.subscriber)
  await until('the removal seen after the reconnect', () => removed.includes('s2'))
  assert.equal(await a.command.hexists(`${prefix}sessions`, 's2'), 0)
})

test('session store: reads are served from memory while Redis is down, writes fail fast with 503', async (t) => {
  const prefix = prefixFor(t)
  const a = await sessionStore(t, prefix)
  await a.store.put(session('s1', 'token-one-secret'))
  a.command.disconnect()
  assert.equal((await a.store.get('s1'))?.kasmId, 's1')
  await assert.rejects(a.store.put(session('s2', 'x')), (err: Error) => {
    const { status, body } = toErrorBody(err)
    return status === 503 && body.error === 'store_unavailable'
  })
})

const record = (sub: string, now: number): CookieSessionRecord => ({
  sub,
  roles: ['operator'],
  teams: [],
  createdAt: now,
  expiresAt: now + 3600_000,
  lastSeenAt: now,
})

test('cookie store: a revocation on one replica is seen by another at once; tombstones hold no identity', async (t) => {
  const prefix = prefixFor(t)
  const keys = clusterKeys(prefix)
  const a = new RedisCookieStore({ command: await connection(t, 'command'), keys, idleMs: 60_000 })
  const b = new RedisCookieStore({ command: await connection(t, 'command'), keys, idleMs: 60_000 })
  const now = Date.now()
  await a.create('h1', record('erin', now))
  await a.create('h2', record('erin', now))
  await a.create('h3', record('frank', now))
  const got = await b.get('h1')
  assert.equal(got?.state, 'active')
  assert.deepEqual(got?.state === 'active' ? got.record : null, record('erin', now), 'empty teams survive')

  await b.touch('h1', now + 5000)
  await b.touch('h1', now + 1000)
  const touched = await a.get('h1')
  assert.equal(
    touched?.state === 'active' ? touched.record.lastSeenAt : 0,
    now + 5000,
    'touch only moves forward',
  )

  assert.equal(await a.revoke('h1'), true)
  assert.equal(await a.revoke('h1'), false)
  const tomb = await b.get('h1')
  assert.equal(tomb?.state, 'revoked')
  const raw = await a.get('h1')
  assert.ok(raw && !('record' in raw))
  assert.deepEqual(Object.keys(await (await connection(t, 'command')).hgetall(keys.cookie('h1'))).sort(), [
    'expiresAt',
    'lastSeenAt',
    'revokedAt',
    'state',
  ])
  await b.touch('h1', now + 9000)
  assert.equal((await b.get('h1'))?.state, 'revoked', 'touch never revives')

  assert.equal(await b.revokeAllOf('erin'), 1, 'h2 only: h1 was already revoked')
  assert.equal((await a.get('h2'))?.state, 'revoked')
  assert.equal((await a.get('h3'))?.state, 'active')
  assert.equal(await a.get('unknown'), null)
})

test('cookie store: an entry is forgotten once it cannot be valid any more (plus retention)', async (t) => {
  const prefix = prefixFor(t)
  const command = await connection(t, 'command')
  const store = new RedisCookieStore({ command, keys: clusterKeys(prefix), idleMs: 200, retainMs: 100 })
  const now = Date.now()
  await store.create('idle', { ...record('gina', now), lastSeenAt: now })
  const ttl = await command.pttl(clusterKeys(prefix).cookie('idle'))
  assert.ok(ttl > 0 && ttl <= 300, `expires after idle + retention (${ttl} ms)`)
  await until('forgotten', async () => (await store.get('idle')) === null)
})

const audit = (i: number, kasmId: string, sub: string): AuditRecord => ({
  at: new Date().toISOString(),
  requestId: `req-${i}`,
  sub,
  kasmId,
  method: 'POST',
  route: 'messages',
  outcome: 'forwarded',
  status: 202,
  latencyMs: 1,
})

test('audit log: records from every replica in one capped stream, newest first, filtered', async (t) => {
  const prefix = prefixFor(t)
  const keys = clusterKeys(prefix)
  const a = new RedisAuditLog({ command: await connection(t, 'command'), keys, capacity: 200, log })
  const b = new RedisAuditLog({ command: await connection(t, 'command'), keys, capacity: 200, log })
  for (let i = 0; i < 300; i++) a.record(audit(i, i % 3 ? 'k1' : 'k2', i % 5 ? 'u1' : 'u2'))
  await until('a written', async () => (await b.recent({ limit: 1 }))[0]?.requestId === 'req-299')
  for (let i = 300; i < 600; i++) b.record(audit(i, i % 3 ? 'k1' : 'k2', i % 5 ? 'u1' : 'u2'))
  await until('b written', async () => (await a.recent({ limit: 1 }))[0]?.requestId === 'req-599')
  const newest = await a.recent({ limit: 3 })
  assert.deepEqual(
    newest.map((r) => r.requestId),
    ['req-599', 'req-598', 'req-597'],
  )
  // Filters page back through the stream until enough match, across both replicas' records.
  const filtered = await a.recent({ limit: 5, kasmId: 'k2', sub: 'u2' })
  assert.deepEqual(
    filtered.map((r) => r.requestId),
    ['req-585', 'req-570', 'req-555', 'req-540', 'req-525'],
  )
  // Only what the capped stream still holds: every 15th of the newest ~200.
  const all = await a.recent({ limit: 1000, kasmId: 'k2', sub: 'u2' })
  assert.ok(all.length >= 13 && all.length < 40, `${all.length} kept`)
  assert.ok(all.every((r) => r.kasmId === 'k2' && r.sub === 'u2'))
  const len = await (await connection(t, 'command')).xlen(keys.audit)
  assert.ok(len >= 200 && len < 600, `capped near 200 (${len})`)
})

test('audit log: records wait to share a write; a read on the same replica writes them first', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  // A window no test waits out: only flush() and reads can write these records.
  const a = new RedisAuditLog({
    command: await connection(t, 'command'),
    keys,
    capacity: 100,
    log,
    flushMs: 60_000,
  })
  const b = new RedisAuditLog({ command: await connection(t, 'command'), keys, capacity: 100, log })
  a.record(audit(1, 'k1', 'u1'))
  a.record(audit(2, 'k1', 'u1'))
  assert.deepEqual(await b.recent({ limit: 5 }), [], 'not written yet')
  assert.deepEqual(
    (await a.recent({ limit: 5 })).map((r) => r.requestId),
    ['req-2', 'req-1'],
    'the replica that made them reads them',
  )
  assert.equal((await b.recent({ limit: 5 })).length, 2, 'written by that read, for every replica')
  a.record(audit(3, 'k1', 'u1'))
  await a.flush()
  assert.equal((await b.recent({ limit: 1 }))[0]?.requestId, 'req-3', 'flush() (at shutdown) writes them')
})

test('audit log: records Redis refuses are kept, then written once it takes them, none twice', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  const command = await connection(t, 'command')
  // Not a stream: every XADD of the script fails (WRONGTYPE), and it says none was written.
  await command.set(keys.audit, 'not a stream')
  const a = new RedisAuditLog({ command, keys, capacity: 100, log, flushMs: 60_000 })
  a.record(audit(1, 'k1', 'u1'))
  a.record(audit(2, 'k1', 'u1'))
  await a.flush()
  assert.equal(await command.get(keys.audit), 'not a stream', 'nothing written over it')
  await command.del(keys.audit)
  a.record(audit(3, 'k1', 'u1'))
  await a.flush()
  assert.deepEqual(
    (await a.recent({ limit: 10 })).map((r) => r.requestId),
    ['req-3', 'req-2', 'req-1'],
  )
  assert.equal(await command.xlen(keys.audit), 3)
})

test('audit log: records made during writes in flight are each written once, in order', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  const command = await connection(t, 'command')
  const a = new RedisAuditLog({ command, keys, capacity: 10_000, log, flushMs: 1 })
  for (let i = 0; i < 1200; i++) {
    a.record(audit(i, 'k1', 'u1'))
    // Bursts between turns: some arrive while a pipeline is in flight, one passes the batch size at once.
    if (i % 7 === 0) await new Promise((resolve) => setImmediate(resolve))
  }
  await a.flush()
  assert.equal(await command.xlen(keys.audit), 1200)
  const ids = (await a.recent({ limit: 1200 })).map((r) => r.requestId)
  assert.deepEqual(
    ids,
    Array.from({ length: 1200 }, (_, i) => `req-${1199 - i}`),
  )
})

test('audit log: records made while Redis is unreachable are written when it returns', async (t) => {
  const prefix = prefixFor(t)
  const keys = clusterKeys(prefix)
  // A connection that is not up yet: nothing can be written, and record() must neither throw nor wait.
  const command = openConnection(
    { redis: { kind: 'url', url: REDIS_TEST_URL }, name: 'krgtest-late', commandTimeoutMs: 2000 },
    'command',
  )
  command.on('error', () => {})
  t.after(() => command.disconnect())
  const audited = new RedisAuditLog({ command, keys, capacity: 100, log })
  audited.record(audit(1, 'k1', 'u1'))
  audited.record(audit(2, 'k1', 'u1'))
  await command.connect()
  await until('flushed on ready', async () => (await audited.recent({ limit: 5 })).length === 2)
  assert.deepEqual(
    (await audited.recent({ limit: 5 })).map((r) => r.requestId),
    ['req-2', 'req-1'],
  )
})

test('audit log: while Redis takes writes nothing is dropped, however many records wait for one in flight', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  const command = await connection(t, 'command')
  const a = new RedisAuditLog({ command, keys, capacity: 10_000, log, pendingMax: 5, flushMs: 60_000 })
  // The 500th record starts a write at once; the next 50 are made while it is in flight, ten times the bound.
  for (let i = 0; i < 550; i++) a.record(audit(i, 'k1', 'u1'))
  await a.flush()
  assert.equal(await command.xlen(keys.audit), 550)
  assert.deepEqual(
    (await a.recent({ limit: 3 })).map((r) => r.requestId),
    ['req-549', 'req-548', 'req-547'],
  )
})

test('audit log: past pendingMax while Redis is unreachable the oldest go, and a warning says how many', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  const command = openConnection(
    { redis: { kind: 'url', url: REDIS_TEST_URL }, name: 'krgtest-late', commandTimeoutMs: 2000 },
    'command',
  )
  command.on('error', () => {})
  t.after(() => command.disconnect())
  const warnings: Array<Record<string, unknown>> = []
  const warnLog = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) })
  const audited = new RedisAuditLog({ command, keys, capacity: 100, log: warnLog, pendingMax: 3 })
  for (let i = 1; i <= 5; i++) audited.record(audit(i, 'k1', 'u1'))
  await command.connect()
  await until('flushed on ready', async () => (await command.xlen(keys.audit)) === 3)
  assert.deepEqual(
    (await audited.recent({ limit: 5 })).map((r) => r.requestId),
    ['req-5', 'req-4', 'req-3'],
  )
  const dropped = warnings.find((w) => w.msg === 'audit records dropped while redis could not take them')
  assert.equal(dropped?.dropped, 2, JSON.stringify(warnings))
})

test('audit log: past pendingMax while Redis refuses the writes the oldest go too, and the rest follow once it takes them', async (t) => {
  const keys = clusterKeys(prefixFor(t))
  const command = await connection(t, 'command')
  // Not a stream: every XADD fails (WRONGTYPE), as on a Redis out of memory; the connection itself is up.
  await command.set(keys.audit, 'not a stream')
  const warnings: Array<Record<string, unknown>> = []
  const warnLog = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) })
  const a = new RedisAuditLog({ command, keys, capacity: 100, log: warnLog, pendingMax: 3, flushMs: 60_000 })
  a.record(audit(1, 'k1', 'u1'))
  await a.flush()
  for (let i = 2; i <= 5; i++) a.record(audit(i, 'k1', 'u1'))
  await command.del(keys.audit)
  await a.flush()
  assert.deepEqual(
    (await a.recent({ limit: 5 })).map((r) => r.requestId),
    ['req-5', 'req-4', 'req-3'],
  )
  const dropped = warnings.find((w) => w.msg === 'audit records dropped while redis could not take them')
  assert.equal(dropped?.dropped, 2, JSON.stringify(warnings))
})

test('presence: merged over replicas, a killed replica drops out after the TTL, a closed one at once', async (t) => {
  const prefix = prefixFor(t)
  const keys = clusterKeys(prefix)
  const make = async (replicaId: string, viewers: WatchingViewer[]) => {
    const command = await connection(t, 'command')
    const p = new RedisPresence({ command, keys, replicaId, ttlMs: 1500, log })
    t.after(() => p.close())
    p.setSource(() => viewers)
    return Object.assign(p, { command })
  }
  const v = (kasmId: string, sub: string, name?: string): WatchingViewer => ({
    kasmId,
    operator: name ? { sub, name } : { sub },
  })
  const onA = [v('k1', 'bob', 'Bob'), v('k1', 'bob'), v('k2', 'carol')]
  const onB = [v('k1', 'carol'), v('k1', 'bob')]
  const a = await make('a', onA)
  const b = await make('b', onB)
  const c = await make('c', [v('k1', 'dave')])
  await Promise.all([a.publish(), b.publish(), c.publish()])
  assert.deepEqual(await a.of('k1'), {
    kasmId: 'k1',
    viewers: 5,
    operators: [
      { sub: 'bob', viewers: 3, name: 'Bob' },
      { sub: 'carol', viewers: 1 },
      { sub: 'dave', viewers: 1 },
    ],
  })
  // Local changes show at once on the replica that has them.
  onA.pop()
  assert.deepEqual(await a.of('k2'), { kasmId: 'k2', viewers: 0, operators: [] })
  await b.close()
  assert.equal((await a.of('k1')).viewers, 3, 'b withdrew on close')
  // c is "killed": it can no longer publish nor withdraw; its entry expires.
  c.command.disconnect()
  await until('c expired', async () => (await a.of('k1')).viewers === 2)
})

test('presence: a refresh writes what changed and drops what ended; a hash Redis lost is written whole again', async (t) => {
  const prefix = prefixFor(t)
  const keys = clusterKeys(prefix)
  const command = await connection(t, 'command')
  const reader = new RedisPresence({ command, keys, replicaId: 'reader', ttlMs: 60_000, log })
  const p = new RedisPresence({ command, keys, replicaId: 'p', ttlMs: 60_000, log })
  t.after(() => Promise.all([p.close(), reader.close()]))
  const viewers: WatchingViewer[] = [
    { kasmId: 'k1', operator: { sub: 'bob' } },
    { kasmId: 'k2', operator: { sub: 'carol' } },
  ]
  p.setSource(() => viewers)
  await p.publish()
  assert.deepEqual(Object.keys(await command.hgetall(keys.presenceOf('p'))).sort(), ['k1', 'k2'])
  viewers.splice(1, 1, { kasmId: 'k1', operator: { sub: 'carol' } })
  await p.publish()
  assert.deepEqual(Object.keys(await command.hgetall(keys.presenceOf('p'))), ['k1'], 'k2 dropped')
  assert.equal((await reader.of('k1')).viewers, 2)
  // Redis lost the hash (a restart without persistence): nothing changed here, so the next refresh finds it
  // gone, and the one after writes everything again.
  await command.del(keys.presenceOf('p'))
  assert.equal((await reader.of('k1')).viewers, 0)
  await p.publish()
  await p.publish()
  assert.equal((await reader.of('k1')).viewers, 2)
  assert.ok((await command.pttl(keys.presenceOf('p'))) > 0, 'the hash expires')
})

test('session store: re-sealing is a fenced compare-and-set that never overwrites a newer write', async (t) => {
  const prefix = prefixFor(t)
  const a = await sessionStore(t, prefix, KEY, 'a')
  await a.store.put(session('s1', 'token-one-secret'))
  await a.store.put(session('s2', 'token-two-secret'))
  const b = await sessionStore(t, prefix, `${OTHER_KEY},${KEY}`, 'b')
  assert.deepEqual(b.store.onOldKey().sort(), ['s1', 's2'])
  await b.store.ready()

  const keys = clusterKeys(prefix)
  const lease = new RedisReaderLease({
    command: defineScripts(b.command),
    keys,
    leaseMs: 5000,
    keyspace: { lease: keys.jobLease, fence: keys.jobFence },
  })
  const fence = await lease.acquire('reseal')
  assert.ok(fence !== null)
  const held = { key: keys.jobLease('reseal'), fence }

  // A stale holder's fence writes nothing.
  assert.equal(await b.store.reseal('s1', { ...held, fence: fence - 1 }), 'fenced')
  // s2 was rewritten since b read it (its announcement not yet in): the re-seal leaves the newer write alone.
  const newer = await a.command.hget(keys.sessions, 's1')
  await a.command.hset(keys.sessions, 's2', newer?.replace('"s1"', '"s2"') ?? '')
  assert.equal(await b.store.reseal('s2', held), 'changed')
  assert.equal(await a.command.hget(keys.sessions, 's2'), newer?.replace('"s1"', '"s2"'))

  const before = await a.command.hget(keys.sessions, 's1')
  assert.equal(await b.store.reseal('s1', held), 'resealed')
  assert.equal(await b.store.reseal('s1', held), 'current')
  const after = JSON.parse((await a.command.hget(keys.sessions, 's1')) ?? '{}') as {
    token: string
    version: number
  }
  assert.notEqual(JSON.stringify(after), before)
  assert.equal(after.version, 1, 'a re-seal is not a change of the session')
  const reopened = await TokenVault.fromBase64url(OTHER_KEY).unseal('s1', after.token)
  assert.equal(reopened.secret.reveal(), 'token-one-secret')
  assert.equal(reopened.current, true)
  assert.deepEqual(b.store.onOldKey(), ['s2'])
})
