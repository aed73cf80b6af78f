import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { bearer } from '../helpers/jwt.ts'
import { GATEWAY_USER, kasmSetup } from './helpers.ts'

/** `POST /admin/sessions`: the gateway mints the token, Kasm starts the session with it, the gateway registers it. */

test('launch: the minted token goes into the session environment, the runtime accepts the gateway with it', async (t) => {
  const { kasm, gw, logs, call, runtimePort } = await kasmSetup(t, {
    kasm: { startingPolls: 2 },
    env: { GATEWAY_KASM_SIDEBAR: 'krg-sidebar' },
  })
  const launched = await call('POST', '/admin/sessions', {
    body: { image: 'Chrome', team: 'blue', environment: { TARGET_URL: 'https://example.test/' } },
  })
  assert.equal(launched.status, 201, launched.text)
  const [session] = [...kasm.sessions.values()]
  assert.ok(session)
  // Registered under the dashed id of Kasm's /desktop/ paths, at the address Kasm reported once running.
  assert.deepEqual(launched.body, {
    kasmId: session.dashed,
    upstream: `http://${session.containerIp}:${runtimePort}/`,
    team: 'blue',
    source: 'launch',
    version: 1,
    kasmUserId: GATEWAY_USER,
    viewerUrl: `${new URL(kasm.url).origin}/#/connect/kasm/${session.dashed}/${GATEWAY_USER}/${(
      launched.body.viewerUrl as string
    )
      .split('/')
      .at(-1)}`,
  })
  assert.equal(session.imageId, kasm.images[0]?.image_id, 'the image name was resolved to its id')
  assert.equal(session.requestedUserId, GATEWAY_USER, "requested for the gateway's own Kasm user")
  const token = session.environment.KASM_RUNTIME_INBOX_TOKEN ?? ''
  assert.match(token, /^[A-Za-z0-9_-]{43}$/, '32 random bytes')
  assert.deepEqual(
    { ...session.environment, KASM_RUNTIME_INBOX_TOKEN: 'x' },
    {
      KASM_RUNTIME_SIDEBAR: 'krg-sidebar',
      TARGET_URL: 'https://example.test/',
      KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: 'true',
      KASM_RUNTIME_INBOX_TOKEN: 'x',
    },
  )
  assert.equal((await gw.app.sessions.get(session.dashed))?.messagingToken.reveal(), token)
  // Never returned, never logged.
  assert.ok(!launched.text.includes(token))
  assert.ok(!logs.text().includes(token))

  // The runtime started with that token takes the gateway's writes, and refuses anyone without it.
  const runtime = session.runtime
  assert.ok(runtime)
  const write = await call('POST', `/desktop/${session.dashed}/mcp/messages`, {
    body: { run: runtime.run, key: 'k1', text: 'hello from the gateway' },
  })
  assert.equal(write.status, 202, write.text)
  const direct = await fetch(`${runtime.url}inbox`)
  assert.ok(direct.status === 401 || direct.status === 403, `observe routes closed: ${direct.status}`)
  // The launch is audited, with the session it made.
  const audit = await call('GET', `/admin/audit?kasmId=${session.dashed}`)
  const launches = (audit.body.records as AuditRecord[]).filter((r) => r.action === 'launch')
  assert.deepEqual(
    launches.map((r) => [r.sub, r.method, r.route, r.status]),
    [['ada', 'POST', 'admin/sessions', 201]],
  )
  assert.ok(kasm.calls.every((c) => c.auth === 'body'))
})

test('launch with HTTP Basic (the current API reference) and the upstream template', async (t) => {
  const { kasm, call } = await kasmSetup(t, {
    kasm: { auth: 'basic' },
    env: {
      GATEWAY_KASM_UPSTREAM: 'template',
      GATEWAY_UPSTREAM_TEMPLATE: 'http://kasm-{kasmId}.sessions.internal:9434/',
      GATEWAY_KASM_ID_FORM: 'plain',
    },
  })
  const image = kasm.images[1]?.image_id
  const launched = await call('POST', '/admin/sessions', {
    body: { image_id: image, team: 'red' },
  })
  assert.equal(launched.status, 201, launched.text)
  const [session] = [...kasm.sessions.values()]
  assert.equal(launched.body.kasmId, session?.id, 'registered under the plain id')
  assert.equal(launched.body.upstream, `http://kasm-${session?.id}.sessions.internal:9434/`)
  assert.equal(session?.requestedUserId, GATEWAY_USER)
  assert.deepEqual(
    kasm.calls.map((c) => [c.call, c.auth]),
    [['request_kasm', 'basic']],
    'no status poll is needed with a template; the credentials only in the header',
  )
})

test('both authentication forms are refused by a Kasm that expects the other one, nothing registered', async (t) => {
  for (const [kasmAuth, gatewayAuth] of [
    ['basic', 'body'],
    ['body', 'basic'],
  ] as const) {
    const { kasm, gw, call } = await kasmSetup(t, { kasm: { auth: kasmAuth }, gatewayAuth })
    const image_id = kasm.images[0]?.image_id
    const res = await call('POST', '/admin/sessions', { body: { image_id, team: 'blue' } })
    assert.equal(res.status, 502, res.text)
    assert.equal(res.body.error, 'kasm_refused')
    assert.match(String(res.body.message), /Kasm refused request_kasm: Unauthorized \(403\)/)
    assert.equal(kasm.sessions.size, 0)
    assert.deepEqual(await gw.app.sessions.list(), [])
  }
})

test('launch refusals: role, team, body, image, Kasm errors and outages, an address that never comes', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t, { env: { GATEWAY_KASM_LAUNCH_TIMEOUT_S: '1' } })
  const operator = await bearer({ sub: 'op', roles: ['operator'], teams: ['*'] })
  const blueAdmin = await bearer({ sub: 'bo', roles: ['admin'], teams: ['blue'] })
  const launch = (body: unknown, token?: string) =>
    call('POST', '/admin/sessions', { body, ...(token ? { token } : {}) })

  const cases: [string, unknown, string | undefined, number, string, RegExp?][] = [
    ['an operator', { image: 'Chrome', team: 'blue' }, operator, 403, 'forbidden'],
    ['another team', { image: 'Chrome', team: 'red' }, blueAdmin, 403, 'forbidden', /team red/],
    ['no image', { team: 'blue' }, undefined, 400, 'bad_request', /exactly one of image_id or image/],
    ['two images', { image: 'Chrome', image_id: 'abc', team: 'blue' }, undefined, 400, 'bad_request'],
    ['no team', { image: 'Chrome' }, undefined, 400, 'bad_request', /team/],
    ['unknown field', { image: 'Chrome', team: 'blue', token: 'x' }, undefined, 400, 'bad_request'],
    [
      'the token set by the caller',
      { image: 'Chrome', team: 'blue', environment: { KASM_RUNTIME_INBOX_TOKEN: 'mine' } },
      undefined,
      400,
      'environment_refused',
      /KASM_RUNTIME_INBOX_TOKEN configures the session runtime/,
    ],
    [
      'observe routes opened by the caller',
      { image: 'Chrome', team: 'blue', environment: { KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: 'false' } },
      undefined,
      400,
      'environment_refused',
    ],
    [
      'a bad variable name',
      { image: 'Chrome', team: 'blue', environment: { 'A B': 'x' } },
      undefined,
      400,
      'bad_request',
    ],
    ['a bad image id', { image_id: '../x', team: 'blue' }, undefined, 400, 'bad_request'],
    [
      'an unknown image',
      { image: 'Netscape', team: 'blue' },
      undefined,
      400,
      'bad_request',
      /no image named "Netscape"/,
    ],
    [
      'an ambiguous image',
      { image: 'Runtime', team: 'blue' },
      undefined,
      400,
      'bad_request',
      /2 Kasm images/,
    ],
  ]
  for (const [name, body, token, status, error, message] of cases) {
    const res = await launch(body, token)
    assert.deepEqual([res.status, res.body.error], [status, error], `${name}: ${res.text}`)
    if (message) assert.match(String(res.body.message), message, name)
  }
  assert.equal(kasm.sessions.size, 0)

  // Kasm's own refusal, as observed live: status 200 with an error_message.
  kasm.failNextRequest('No resources are available to launch the requested Kasm')
  const refused = await launch({ image: 'Chrome', team: 'blue' })
  assert.deepEqual([refused.status, refused.body.error], [502, 'kasm_refused'])
  assert.match(String(refused.body.message), /No resources are available/)

  // Kasm down: unreachable, then a proxy's HTML error page.
  await kasm.setDown('refuse')
  const down = await launch({ image: 'Chrome', team: 'blue' })
  assert.deepEqual([down.status, down.body.error], [502, 'kasm_unreachable'])
  await kasm.setDown('html')
  const html = await launch({ image: 'Chrome', team: 'blue' })
  assert.deepEqual([html.status, html.body.error], [502, 'kasm_unreachable'])
  await kasm.setDown(null)

  assert.equal(kasm.sessions.size, 0)
  assert.deepEqual(await gw.app.sessions.list(), [])
})

test('a session that never reports its address is destroyed again, not left running with a lost token', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t, {
    kasm: { startingPolls: 1_000_000 },
    env: { GATEWAY_KASM_LAUNCH_TIMEOUT_S: '1' },
  })
  const res = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.deepEqual([res.status, res.body.error], [504, 'kasm_launch_timeout'], res.text)
  assert.equal(kasm.sessions.size, 0, 'destroyed in Kasm')
  assert.ok(kasm.calls.some((c) => c.call === 'destroy_kasm'))
  assert.ok(kasm.calls.filter((c) => c.call === 'get_kasm_status').length >= 2, 'it polled meanwhile')
  assert.deepEqual(await gw.app.sessions.list(), [])
})

test('zone upstreams: a fixed upstream per Kasm zone; a zone without one is refused and the session destroyed', async (t) => {
  const zoned = await kasmSetup(t, {
    kasm: { zoneName: 'eu-west' },
    env: {
      GATEWAY_KASM_UPSTREAM: 'zone',
      GATEWAY_KASM_ZONE_UPSTREAMS:
        'eu-west=http://runtimes.eu-west.internal/{kasmId}/,us=http://us.internal/',
    },
  })
  const res = await zoned.call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(res.status, 201, res.text)
  assert.equal(res.body.upstream, `http://runtimes.eu-west.internal/${res.body.kasmId}/`)

  const elsewhere = await kasmSetup(t, {
    kasm: { zoneName: 'ap-south' },
    env: { GATEWAY_KASM_UPSTREAM: 'zone', GATEWAY_KASM_ZONE_UPSTREAMS: 'eu-west=http://eu.internal/' },
  })
  const refused = await elsewhere.call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.deepEqual([refused.status, refused.body.error], [502, 'kasm_bad_answer'])
  assert.match(String(refused.body.message), /zone "ap-south" has no upstream/)
  assert.equal(elsewhere.kasm.sessions.size, 0)
})

test('a launched session keeps its minted token: PUT cannot replace it; without Kasm configured, no launch', async (t) => {
  const { call } = await kasmSetup(t)
  const launched = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.equal(launched.status, 201)
  const put = await call('PUT', `/admin/sessions/${launched.body.kasmId}`, {
    body: { upstream: 'http://10.0.0.1:9434/', team: 'blue', messagingToken: 'another-token' },
  })
  assert.deepEqual([put.status, put.body.error], [409, 'session_conflict'])
  assert.match(String(put.body.message), /launch a new one/)

  const { startGateway } = await import('../helpers/gateway.ts')
  const plain = await startGateway()
  t.after(() => plain.close())
  const admin = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const res = await fetch(`${plain.url}/admin/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ image: 'Chrome', team: 'blue' }),
  })
  assert.equal(res.status, 501)
  assert.equal(((await res.json()) as { error: string }).error, 'kasm_not_configured')
})

test('PUT lifecycle: "kasm" follows Kasm, "manual" (the default) does not, anything else is refused', async (t) => {
  const { call } = await kasmSetup(t)
  const body = {
    upstream: 'http://10.0.0.1:9434/',
    team: 'blue',
    messagingToken: 'a-token-of-the-orchestrator',
  }
  const followed = await call('PUT', '/admin/sessions/k-follow', { body: { ...body, lifecycle: 'kasm' } })
  assert.deepEqual([followed.status, followed.body.source], [201, 'kasm'])
  const manual = await call('PUT', '/admin/sessions/k-manual', { body: { ...body, lifecycle: 'manual' } })
  assert.deepEqual([manual.status, manual.body.source], [201, 'admin'])
  const bad = await call('PUT', '/admin/sessions/k-bad', { body: { ...body, lifecycle: 'forever' } })
  assert.deepEqual([bad.status, bad.body.error], [400, 'bad_request'])
  assert.match(String(bad.body.message), /lifecycle/)
})
