import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Operator, Role } from '../../src/auth/operator.ts'
import { MemorySessionStore } from '../../src/sessions/memory-store.ts'
import { StoreSessionRegistry } from '../../src/sessions/registry.ts'
import { Secret } from '../../src/sessions/secret.ts'
import type { SessionInput } from '../../src/sessions/types.ts'

function operator(teams: string[], roles: Role[] = ['operator']): Operator {
  return {
    sub: 'alice',
    roles: new Set(roles),
    teams: new Set(teams),
    via: 'bearer',
    expiresAt: Date.now() + 60_000,
  }
}

const input = (over: Partial<SessionInput> = {}): SessionInput => ({
  kasmId: 'k1',
  upstream: 'http://10.0.0.5:9434',
  team: 'blue',
  messagingToken: 'tok-1',
  source: 'admin',
  ...over,
})

/** The error a promise rejects with, as the fields a client would see. */
async function rejection(
  promise: Promise<unknown>,
): Promise<{ code?: string; statusCode?: number; message: string }> {
  const err = (await promise.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  )) as { code?: string; statusCode?: number; message: string }
  return { code: err.code, statusCode: err.statusCode, message: err.message }
}

test('put registers a session, returns a view without its token, and versions replacements', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  const created = await registry.put(input())
  assert.deepEqual(created, {
    kasmId: 'k1',
    upstream: 'http://10.0.0.5:9434/',
    team: 'blue',
    source: 'admin',
    version: 1,
  })
  const session = await registry.get('k1')
  assert.equal(session?.messagingToken.reveal(), 'tok-1')
  assert.ok(!JSON.stringify(session).includes('tok-1'), 'a session serialises its token')

  assert.equal((await registry.put(input({ team: 'red' }))).version, 1, 'a team change keeps the version')
  assert.equal(
    (await registry.put(input({ team: 'red', messagingToken: 'tok-2' }))).version,
    2,
    'rotation bumps',
  )
  assert.equal(
    (await registry.put(input({ team: 'red', messagingToken: 'tok-2', upstream: 'http://other/' }))).version,
    3,
  )
  assert.equal(
    (await registry.put(input({ team: 'red', messagingToken: 'tok-2', upstream: 'http://other' }))).version,
    3,
  )
  assert.deepEqual(await registry.list(), [
    { kasmId: 'k1', upstream: 'http://other/', team: 'red', source: 'admin', version: 3 },
  ])
})

test('concurrent puts are applied one at a time (each rotation bumps once)', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  await registry.put(input())
  await Promise.all([2, 3, 4, 5, 6].map((n) => registry.put(input({ messagingToken: `tok-${n}` }))))
  assert.equal((await registry.get('k1'))?.version, 6)
})

test('put refuses invalid input with bad_request and never quotes the token', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  const cases: Array<[Partial<SessionInput>, RegExp]> = [
    [{ kasmId: '../k1' }, /^kasmId: must be 1-128/],
    [{ upstream: 'file:///etc/passwd' }, /^upstream: must be an absolute http\(s\) URL/],
    [{ team: '' }, /^team: must be a non-empty string/],
    [{ messagingToken: 'bad token\r\nx-evil: 1' }, /^messagingToken: must be printable ASCII/],
    [{ upstream: undefined }, /^upstream: is required \(GATEWAY_UPSTREAM_TEMPLATE is not set\)/],
  ]
  for (const [over, message] of cases) {
    const err = await rejection(registry.put(input(over)))
    assert.equal(err.statusCode, 400)
    assert.equal(err.code?.toLowerCase(), 'bad_request')
    assert.match(err.message, message)
    assert.ok(!err.message.includes('bad token'))
  }
  assert.deepEqual(await registry.list(), [])
})

test('the template gives the upstream of a session registered without one', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore(), {
    template: 'https://kasm-proxy.internal/desktop/{kasmId}/mcp',
  })
  const view = await registry.put(input({ kasmId: 'abc-1', upstream: undefined }))
  assert.equal(view.upstream, 'https://kasm-proxy.internal/desktop/abc-1/mcp/')
  const explicit = await registry.put(input({ kasmId: 'abc-2', upstream: 'http://direct:9434/' }))
  assert.equal(explicit.upstream, 'http://direct:9434/')
})

test('resolve: a foreign session fails exactly like an unknown or malformed one', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  await registry.put(input({ kasmId: 'k1', team: 'blue' }))
  await registry.put(input({ kasmId: 'k2', team: 'red' }))

  assert.equal((await registry.resolve('k1', operator(['blue']))).kasmId, 'k1')
  assert.equal((await registry.resolve('k2', operator(['*']))).kasmId, 'k2')
  assert.equal((await registry.resolve('k2', operator(['blue', 'red']))).kasmId, 'k2')

  const foreign = await rejection(registry.resolve('k2', operator(['blue'])))
  const unknown = await rejection(registry.resolve('k9', operator(['blue'])))
  const malformed = await rejection(registry.resolve('k1/../k2', operator(['*'])))
  const noTeams = await rejection(registry.resolve('k1', operator([])))
  assert.equal(foreign.statusCode, 404)
  assert.equal(foreign.code?.toLowerCase(), 'session_not_found')
  assert.deepEqual(foreign, unknown)
  assert.deepEqual(foreign, malformed)
  assert.deepEqual(foreign, noTeams)
  assert.equal(await registry.get('k1/../k2'), undefined)

  // Without waiting: a held session the operator may see, else nothing (and `resolve` gives the refusal).
  assert.equal(registry.resolveHeld('k1', operator(['blue']))?.kasmId, 'k1')
  assert.equal(registry.resolveHeld('k2', operator(['*']))?.kasmId, 'k2')
  assert.equal(registry.resolveHeld('k2', operator(['blue'])), undefined)
  assert.equal(registry.resolveHeld('k9', operator(['blue'])), undefined)
  assert.equal(registry.resolveHeld('k1/../k2', operator(['*'])), undefined)
  assert.equal(registry.resolveHeld('k1', operator([])), undefined)
  await registry.remove('k1')
  assert.equal(registry.resolveHeld('k1', operator(['blue'])), undefined, 'a removed session is not held')
})

test('onChange hears puts and removals until unsubscribed', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  const heard: string[] = []
  const off = registry.onChange((kasmId) => heard.push(kasmId))
  await registry.put(input({ kasmId: 'a' }))
  await registry.put(input({ kasmId: 'a', messagingToken: 'rotated' }))
  assert.equal(await registry.remove('a'), true)
  assert.equal(await registry.remove('a'), false, 'removing twice')
  assert.deepEqual(heard, ['a', 'a', 'a'])
  off()
  await registry.put(input({ kasmId: 'b' }))
  assert.deepEqual(heard, ['a', 'a', 'a'])
})

test('a listener that throws neither fails the write nor silences the others', async () => {
  const errors: unknown[] = []
  const registry = new StoreSessionRegistry(new MemorySessionStore((err) => errors.push(err)))
  const heard: string[] = []
  registry.onChange(() => {
    throw new Error('listener bug')
  })
  registry.onChange((kasmId) => heard.push(kasmId))
  await registry.put(input())
  assert.deepEqual(heard, ['k1'])
  assert.equal((errors[0] as Error).message, 'listener bug')
})

test('file sessions: applied as a set, never replaced or removed by another source', async () => {
  const registry = new StoreSessionRegistry(new MemorySessionStore())
  const file = (kasmId: string, token: string, upstream = `http://${kasmId}/`, team = 'blue') => ({
    kasmId,
    upstream,
    team,
    messagingToken: new Secret(token),
  })
  await registry.put(input({ kasmId: 'adm', source: 'admin' }))
  const first = await registry.applyFile([
    file('f1', 't1'),
    file('f2', 't2'),
    file('f3', 't3'),
    file('adm', 'x'),
  ])
  assert.deepEqual(first, { added: ['f1', 'f2', 'f3'], changed: [], removed: [], shadowed: ['adm'] })
  assert.equal((await registry.get('adm'))?.source, 'admin', 'an admin session is not taken over by the file')

  const conflict = await rejection(registry.put(input({ kasmId: 'f1', source: 'admin' })))
  assert.equal(conflict.statusCode, 409)
  assert.equal(conflict.code?.toLowerCase(), 'session_conflict')
  assert.match(conflict.message, /GATEWAY_SESSIONS_FILE/)
  assert.equal((await rejection(registry.remove('f1'))).statusCode, 409)

  const heard: string[] = []
  registry.onChange((kasmId) => heard.push(kasmId))
  const second = await registry.applyFile([
    file('f1', 't1-rotated'),
    file('f2', 't2', 'http://f2/', 'red'),
    file('f4', 't4'),
  ])
  assert.deepEqual(second, { added: ['f4'], changed: ['f1', 'f2'], removed: ['f3'], shadowed: [] })
  assert.deepEqual(heard.sort(), ['f1', 'f2', 'f3', 'f4'])
  const versions = Object.fromEntries(
    (await registry.list()).map((v) => [v.kasmId, [v.version, v.team, v.source]]),
  )
  assert.deepEqual(versions, {
    adm: [1, 'blue', 'admin'],
    f1: [2, 'blue', 'file'],
    f2: [1, 'red', 'file'],
    f4: [1, 'blue', 'file'],
  })

  heard.length = 0
  const same = await registry.applyFile([
    file('f1', 't1-rotated'),
    file('f2', 't2', 'http://f2/', 'red'),
    file('f4', 't4'),
  ])
  assert.deepEqual(same, { added: [], changed: [], removed: [], shadowed: [] })
  assert.deepEqual(heard, [], 'an unchanged reload notifies nobody')
})
