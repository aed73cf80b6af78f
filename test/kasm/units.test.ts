import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { apiBase, KasmClient } from '../../src/kasm/client.ts'
import { registryKasmId, sameKasmId } from '../../src/kasm/ids.ts'
import { parseZones, type UpstreamRules, upstreamFor } from '../../src/kasm/upstream.ts'
import { Secret } from '../../src/sessions/secret.ts'

test('Kasm ids: the same session with or without dashes; registered in the configured form', () => {
  assert.ok(sameKasmId('4fa42139-aef3-4c86-929a-e479cda68857', '4FA42139AEF34C86929AE479CDA68857'))
  assert.equal(
    registryKasmId('4fa42139aef34c86929ae479cda68857', 'dashed'),
    '4fa42139-aef3-4c86-929a-e479cda68857',
  )
  assert.equal(
    registryKasmId('4fa42139-aef3-4c86-929a-e479cda68857', 'plain'),
    '4fa42139aef34c86929ae479cda68857',
  )
  assert.equal(
    registryKasmId('not-a-uuid_1', 'dashed'),
    'not-a-uuid_1',
    'other ids are kept as Kasm wrote them',
  )
  assert.equal(registryKasmId('../etc/passwd', 'dashed'), null)
})

const rules = (over: Partial<UpstreamRules>): UpstreamRules => ({
  mode: 'status',
  template: undefined,
  statusTemplate: 'http://{container_ip}:9434/',
  zones: new Map(),
  ...over,
})

test('status upstreams take only a host or address from Kasm; anything else is refused, not pasted', () => {
  const at = (containerIp: string) => upstreamFor(rules({}), 'k1', { kasmId: 'k1', containerIp })
  assert.deepEqual(at('172.18.0.4'), { ok: true, url: 'http://172.18.0.4:9434/' })
  assert.deepEqual(at('fd00::4'), { ok: true, url: 'http://[fd00::4]:9434/' })
  for (const hostile of ['evil.example@10.0.0.1', '10.0.0.1/x?', '10.0.0.1:80#', 'a b', '']) {
    const result = at(hostile)
    assert.equal(result.ok, false, hostile)
  }
  assert.deepEqual(upstreamFor(rules({}), 'k1', { kasmId: 'k1' }), {
    ok: false,
    pending: true,
    reason: 'Kasm has not reported container_ip yet',
  })
  const byHost = upstreamFor(rules({ statusTemplate: 'https://{hostname}.sessions:9434/{kasmId}/' }), 'k1', {
    kasmId: 'k1',
    hostname: 'kasm-b057c375',
  })
  assert.deepEqual(byHost, { ok: true, url: 'https://kasm-b057c375.sessions:9434/k1/' })
})

test('zone upstreams: the zone of the session picks the upstream', () => {
  const zones = parseZones(['eu=http://eu.internal/{kasmId}/', 'us=http://us.internal:9434'])
  const r = rules({ mode: 'zone', zones })
  assert.deepEqual(upstreamFor(r, 'k1', { kasmId: 'k1', zoneName: 'eu' }), {
    ok: true,
    url: 'http://eu.internal/k1/',
  })
  assert.deepEqual(upstreamFor(r, 'k1', { kasmId: 'k1', zoneName: 'us' }), {
    ok: true,
    url: 'http://us.internal:9434/',
  })
  const unknown = upstreamFor(r, 'k1', { kasmId: 'k1', zoneName: 'ap' })
  assert.equal(unknown.ok || unknown.pending, false)
})

test('the API base: an origin alone means /api/public/, a path is kept', () => {
  assert.equal(apiBase('https://kasm.example.com'), 'https://kasm.example.com/api/public/')
  assert.equal(apiBase('https://kasm.example.com/api/public'), 'https://kasm.example.com/api/public/')
  assert.equal(
    apiBase('https://kasm.example.com/kasm/api/public/'),
    'https://kasm.example.com/kasm/api/public/',
  )
})

test('an answer the client cannot read whole is a failure, never "Kasm has no sessions"', async (t) => {
  let body = ''
  const server = http.createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(body),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  const client = new KasmClient({
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/public/`,
    key: new Secret('the-api-key'),
    secret: new Secret('the-api-secret'),
    auth: 'body',
    timeoutMs: 2000,
    userAgent: 'test',
  })
  for (const [answer, code] of [
    ['{"kasms": [{"kasm_id": "a"}, {"user_id": "no id"}]}', 'KASM_BAD_ANSWER'],
    ['{"kasms": "none"}', 'KASM_BAD_ANSWER'],
    ['{}', 'KASM_BAD_ANSWER'],
    ['[]', 'KASM_BAD_ANSWER'],
    ['<html>oops</html>', 'KASM_BAD_ANSWER'],
    ['{"error_message": "key the-api-secret expired", "kasms": []}', 'KASM_REFUSED'],
  ]) {
    body = answer as string
    await assert.rejects(client.getKasms(), (err: Error & { code?: string }) => {
      assert.equal(err.code, code, answer)
      assert.ok(!err.message.includes('the-api-secret'), 'a secret Kasm echoes is not repeated')
      return true
    })
  }
  body = '{"kasms": [{"kasm_id": "a", "container_ip": "10.0.0.1", "port": 443}], "current_time": "now"}'
  assert.deepEqual(await client.getKasms(), [{ kasmId: 'a', containerIp: '10.0.0.1' }])
})

test('Kasm configuration is checked at boot, naming the variable', () => {
  const base = { GATEWAY_KASM_API_URL: 'https://kasm.example.com' }
  const refusals: [Record<string, string>, RegExp][] = [
    [base, /GATEWAY_KASM_API_KEY and GATEWAY_KASM_API_SECRET/],
    [
      { ...base, GATEWAY_KASM_API_KEY: 'k', GATEWAY_KASM_API_SECRET: 's' },
      /GATEWAY_UPSTREAM_TEMPLATE: required with GATEWAY_KASM_UPSTREAM=template/,
    ],
    [{ GATEWAY_KASM_UPSTREAM: 'zone' }, /GATEWAY_KASM_ZONE_UPSTREAMS: required/],
    [{ GATEWAY_KASM_ZONE_UPSTREAMS: 'no-url' }, /GATEWAY_KASM_ZONE_UPSTREAMS/],
    [
      { GATEWAY_KASM_API_URL: 'https://key:secret@kasm.example.com' },
      /GATEWAY_KASM_API_URL: must not carry credentials/,
    ],
    [{ GATEWAY_KASM_API_AUTH: 'digest' }, /GATEWAY_KASM_API_AUTH/],
    [{ GATEWAY_KASM_STATUS_UPSTREAM: 'http://runtime:9434/' }, /GATEWAY_KASM_STATUS_UPSTREAM/],
    [{ GATEWAY_KASM_SIDEBAR: 'a b' }, /GATEWAY_KASM_SIDEBAR/],
  ]
  for (const [env, message] of refusals) {
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && message.test(err.message),
      JSON.stringify(env),
    )
  }
  const ok = loadConfig({
    ...base,
    GATEWAY_KASM_API_KEY: 'k',
    GATEWAY_KASM_API_SECRET: 's',
    GATEWAY_KASM_UPSTREAM: 'status',
  }).env
  assert.deepEqual(
    [ok.GATEWAY_KASM_API_AUTH, ok.GATEWAY_KASM_SYNC_S, ok.GATEWAY_KASM_STATUS_UPSTREAM],
    ['body', 30, 'http://{container_ip}:9434/'],
  )
})
