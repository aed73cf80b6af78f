import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ConfigError, configVariables, loadConfig } from '../../src/config.ts'

test('defaults: embedded demo mode with nothing configured', () => {
  const config = loadConfig({})
  assert.equal(config.env.PORT, 8080)
  assert.equal(config.env.HOST, '0.0.0.0')
  assert.equal(config.env.REDIS_URL, undefined)
  assert.equal(config.env.GATEWAY_ROLES_CLAIM, 'roles')
  assert.equal(config.env.GATEWAY_TEAMS_CLAIM, 'teams')
  assert.equal(config.env.GATEWAY_MAX_ATTACHMENT_BYTES, 8 * 1024 * 1024)
  assert.equal(config.env.GATEWAY_MAX_JSON_BYTES, 64 * 1024)
  assert.equal(config.env.GATEWAY_EVENT_BUFFER, 4096)
  assert.equal(config.demo, true)
  assert.equal(config.cookieName, 'krg_session')
})

test('the demo never starts in production or with a sessions file', () => {
  const prod = {
    NODE_ENV: 'production',
    GATEWAY_COOKIE_SECRET: 'x'.repeat(32),
    GATEWAY_JWT_SECRET: 'y'.repeat(32),
  }
  assert.equal(loadConfig(prod).demo, false)
  assert.equal(loadConfig({ GATEWAY_SESSIONS_FILE: '/etc/sessions.json' }).demo, false)
  assert.throws(() => loadConfig({ ...prod, GATEWAY_DEMO: 'on' }), /GATEWAY_DEMO/)
})

test('HTTPS public origin gives a __Host- cookie', () => {
  const config = loadConfig({ GATEWAY_PUBLIC_ORIGIN: 'https://support.example.com/some/path' })
  assert.equal(config.cookieSecure, true)
  assert.equal(config.cookieName, '__Host-krg_session')
  assert.equal(config.env.GATEWAY_PUBLIC_ORIGIN, 'https://support.example.com')
})

test('lists are split and trimmed; empty strings mean unset', () => {
  const config = loadConfig({
    GATEWAY_ALLOWED_ORIGINS: 'https://a.example , https://b.example/x',
    GATEWAY_COOKIE_SECRET: `${'n'.repeat(32)},${'o'.repeat(40)}`,
    PORT: '',
  })
  assert.deepEqual(config.env.GATEWAY_ALLOWED_ORIGINS, ['https://a.example', 'https://b.example'])
  assert.equal(config.env.GATEWAY_COOKIE_SECRET?.length, 2)
  assert.equal(config.env.PORT, 8080)
})

const refusals: Array<[string, Record<string, string>, RegExp]> = [
  ['port out of range', { PORT: '70000' }, /PORT/],
  ['port not a number', { PORT: 'eighty' }, /PORT/],
  ['bad log level', { LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
  ['redis url scheme', { REDIS_URL: 'http://localhost:6379' }, /REDIS_URL/],
  ['a sentinel without a port', { GATEWAY_REDIS_SENTINELS: 'sentinel-a' }, /GATEWAY_REDIS_SENTINELS/],
  ['a sentinel port out of range', { GATEWAY_REDIS_SENTINELS: 'a:99999' }, /GATEWAY_REDIS_SENTINELS/],
  [
    'a bad sentinel master name',
    { GATEWAY_REDIS_SENTINEL_MASTER: 'my master' },
    /GATEWAY_REDIS_SENTINEL_MASTER/,
  ],
  [
    'a sentinel password without sentinels',
    { GATEWAY_REDIS_SENTINEL_PASSWORD: 'pw' },
    /GATEWAY_REDIS_SENTINEL_PASSWORD: only with GATEWAY_REDIS_SENTINELS/,
  ],
  ['sentinels without an encryption key', { GATEWAY_REDIS_SENTINELS: 'a:26379' }, /GATEWAY_ENCRYPTION_KEY/],
  [
    'a cluster node without a port',
    { GATEWAY_REDIS_CLUSTER_NODES: 'a:6379,b' },
    /GATEWAY_REDIS_CLUSTER_NODES/,
  ],
  [
    'a Redis Cluster without an encryption key',
    { GATEWAY_REDIS_CLUSTER_NODES: 'a:6379' },
    /GATEWAY_ENCRYPTION_KEY/,
  ],
  [
    'a NAT map without a Redis Cluster',
    { GATEWAY_REDIS_CLUSTER_NAT_MAP: '{"10.0.0.1:6379":{"host":"a","port":1}}' },
    /GATEWAY_REDIS_CLUSTER_NAT_MAP: only with GATEWAY_REDIS_CLUSTER_NODES/,
  ],
  [
    'a NAT map that is not JSON',
    { GATEWAY_REDIS_CLUSTER_NAT_MAP: '{10.0.0.1' },
    /GATEWAY_REDIS_CLUSTER_NAT_MAP/,
  ],
  [
    'a NAT map entry without a port',
    { GATEWAY_REDIS_CLUSTER_NAT_MAP: '{"10.0.0.1:6379":{"host":"a"}}' },
    /GATEWAY_REDIS_CLUSTER_NAT_MAP/,
  ],
  ['short jwt secret', { GATEWAY_JWT_SECRET: 'short' }, /GATEWAY_JWT_SECRET/],
  [
    'short cookie secret in a list',
    { GATEWAY_COOKIE_SECRET: `${'a'.repeat(32)},short` },
    /GATEWAY_COOKIE_SECRET/,
  ],
  [
    'template without {kasmId}',
    { GATEWAY_UPSTREAM_TEMPLATE: 'http://proxy/desktop/mcp/' },
    /GATEWAY_UPSTREAM_TEMPLATE/,
  ],
  ['allowed origin not a URL', { GATEWAY_ALLOWED_ORIGINS: 'not-a-url' }, /GATEWAY_ALLOWED_ORIGINS/],
  [
    'jwks without issuer',
    { GATEWAY_JWKS_URL: 'https://idp/jwks', GATEWAY_JWT_AUDIENCE: 'a' },
    /GATEWAY_JWT_ISSUER/,
  ],
  [
    'production without cookie secret',
    { NODE_ENV: 'production', GATEWAY_JWT_SECRET: 'y'.repeat(32) },
    /GATEWAY_COOKIE_SECRET/,
  ],
  [
    'production without any JWT key',
    { NODE_ENV: 'production', GATEWAY_COOKIE_SECRET: 'x'.repeat(32) },
    /GATEWAY_JWKS_URL/,
  ],
  ['redis without encryption key', { REDIS_URL: 'redis://127.0.0.1:6379' }, /GATEWAY_ENCRYPTION_KEY/],
  ['bad encryption key', { GATEWAY_ENCRYPTION_KEY: 'abc' }, /GATEWAY_ENCRYPTION_KEY/],
  [
    'second encryption key bad',
    { GATEWAY_ENCRYPTION_KEY: `${'k'.repeat(43)},short` },
    /GATEWAY_ENCRYPTION_KEY\.1: must be 32 bytes/,
  ],
  [
    'encryption key listed twice',
    { GATEWAY_ENCRYPTION_KEY: `${'k'.repeat(43)},${'k'.repeat(43)}` },
    /GATEWAY_ENCRYPTION_KEY: lists the same key twice/,
  ],
  ['no encryption key in the list', { GATEWAY_ENCRYPTION_KEY: ' , ' }, /GATEWAY_ENCRYPTION_KEY/],
  ['bad boolean', { GATEWAY_STREAM_EAGER: 'maybe' }, /GATEWAY_STREAM_EAGER/],
  ['trust proxy not addresses', { GATEWAY_TRUST_PROXY: 'banana' }, /GATEWAY_TRUST_PROXY/],
  [
    'upstream allow entry',
    { GATEWAY_UPSTREAM_ALLOW: 'ok.test,not a host' },
    /GATEWAY_UPSTREAM_ALLOW.*not a host/,
  ],
  ['upstream allow CIDR', { GATEWAY_UPSTREAM_ALLOW: '10.0.0.0/40' }, /GATEWAY_UPSTREAM_ALLOW/],
  [
    'a session buffer smaller than two of the largest events',
    { GATEWAY_EVENT_MAX_BYTES: '1048576', GATEWAY_EVENT_BUFFER_BYTES: '1048576' },
    /GATEWAY_EVENT_BUFFER_BYTES/,
  ],
  [
    'a replica budget smaller than one session',
    { GATEWAY_EVENT_BUFFER_TOTAL_BYTES: '1048576' },
    /GATEWAY_EVENT_BUFFER_TOTAL_BYTES/,
  ],
  [
    'a negative shedding threshold',
    { GATEWAY_OVERLOAD_HEAP_USED_BYTES: '-1' },
    /GATEWAY_OVERLOAD_HEAP_USED_BYTES/,
  ],
]
for (const [name, env, pattern] of refusals) {
  test(`refused at boot: ${name}`, () => {
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
    )
  })
}

test('GATEWAY_ENCRYPTION_KEY is a comma list, the sealing key first', () => {
  const [a, b] = ['a'.repeat(43), 'b'.repeat(43)]
  assert.deepEqual(loadConfig({ GATEWAY_ENCRYPTION_KEY: ` ${b} , ${a}` }).env.GATEWAY_ENCRYPTION_KEY, [b, a])
  assert.deepEqual(loadConfig({ GATEWAY_ENCRYPTION_KEY: a }).env.GATEWAY_ENCRYPTION_KEY, [a])
})

test('configVariables names every variable once', () => {
  assert.equal(new Set(configVariables).size, configVariables.length)
  for (const name of [
    'PORT',
    'HOST',
    'REDIS_URL',
    'LOG_LEVEL',
    'GATEWAY_SESSIONS_FILE',
    'GATEWAY_JWKS_URL',
  ]) {
    assert.ok(configVariables.includes(name), name)
  }
})

test('a secret can be read from <NAME>_FILE, never from both, never from a missing or empty file', async (t) => {
  const { mkdtemp, rm, writeFile } = await import('node:fs/promises')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const dir = await mkdtemp(join(tmpdir(), 'krg-secret-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'jwt')
  await writeFile(file, `${'s'.repeat(40)}\n`)
  assert.equal(loadConfig({ GATEWAY_JWT_SECRET_FILE: file }).env.GATEWAY_JWT_SECRET, 's'.repeat(40))
  // The file's value is validated like the variable's.
  const short = join(dir, 'short')
  await writeFile(short, 'too-short')
  assert.throws(() => loadConfig({ GATEWAY_JWT_SECRET_FILE: short }), /GATEWAY_JWT_SECRET: must be at least/)
  assert.throws(
    () => loadConfig({ GATEWAY_JWT_SECRET_FILE: file, GATEWAY_JWT_SECRET: 'x'.repeat(40) }),
    (err: unknown) => err instanceof ConfigError && /not both/.test(err.message),
  )
  assert.throws(() => loadConfig({ GATEWAY_COOKIE_SECRET_FILE: join(dir, 'absent') }), /ENOENT/)
  const empty = join(dir, 'empty')
  await writeFile(empty, '\n')
  assert.throws(
    () => loadConfig({ GATEWAY_ENCRYPTION_KEY_FILE: empty }),
    /GATEWAY_ENCRYPTION_KEY_FILE: .* is empty/,
  )
})

test('cluster mode: one Redis URL, or a Sentinel group with the URL giving only credentials and database', () => {
  const key = { GATEWAY_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64url') }
  assert.equal(loadConfig({}).redis, null)
  assert.deepEqual(loadConfig({ ...key, REDIS_URL: 'rediss://u:p@r:6380/2' }).redis, {
    kind: 'url',
    url: 'rediss://u:p@r:6380/2',
  })
  assert.deepEqual(
    loadConfig({
      ...key,
      GATEWAY_REDIS_SENTINELS: 'sentinel-a:26379, [fd00::1]:26380,10.0.0.3:26381',
      GATEWAY_REDIS_SENTINEL_PASSWORD: 'spw',
      REDIS_URL: 'redis://:pw@mymaster/1',
    }).redis,
    {
      kind: 'sentinel',
      sentinels: [
        { host: 'sentinel-a', port: 26379 },
        { host: 'fd00::1', port: 26380 },
        { host: '10.0.0.3', port: 26381 },
      ],
      master: 'mymaster',
      sentinelPassword: 'spw',
      url: 'redis://:pw@mymaster/1',
    },
  )
  // A Redis Cluster: REDIS_URL gives the (URL-encoded) credentials and TLS only.
  assert.deepEqual(
    loadConfig({
      ...key,
      GATEWAY_REDIS_CLUSTER_NODES: 'node-0:6379,[fd00::2]:7000',
      GATEWAY_REDIS_CLUSTER_NAT_MAP: '{"10.0.0.1:6379":{"host":"node-0.example","port":16379}}',
      REDIS_URL: 'rediss://gw:p%40ss@cluster/0',
    }).redis,
    {
      kind: 'cluster',
      nodes: [
        { host: 'node-0', port: 6379 },
        { host: 'fd00::2', port: 7000 },
      ],
      username: 'gw',
      password: 'p@ss',
      tls: true,
      natMap: { '10.0.0.1:6379': { host: 'node-0.example', port: 16379 } },
    },
  )
  assert.deepEqual(loadConfig({ ...key, GATEWAY_REDIS_CLUSTER_NODES: 'node-0:6379' }).redis, {
    kind: 'cluster',
    nodes: [{ host: 'node-0', port: 6379 }],
    username: undefined,
    password: undefined,
    tls: false,
    natMap: undefined,
  })
})
