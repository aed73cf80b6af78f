import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { TEST_ENCRYPTION_KEY } from '../cluster/cluster-harness.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix } from '../cluster/redis-harness.ts'
import { openSse, startStack, until } from '../events/helpers.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { clusterFamilies, gatewayFamilies, standardFamilies } from '../helpers/metric-families.ts'
import { type Family, parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string
}

/** Counters whose known label values exist at 0 from the first scrape, for alerts on rate() and increase(). */
const zeroed: Record<string, [string, string[]]> = {
  krg_upstream_errors_total: [
    'reason',
    ['unreachable', 'timeout', 'token_refused', 'stream_dropped', 'stream_stalled'],
  ],
  krg_auth_failures_total: ['reason', ['missing', 'expired', 'bad_signature', 'csrf', 'store_unavailable']],
  krg_event_upstream_reconnects_total: [
    'reason',
    [
      'not_up',
      'dropped',
      'stalled',
      'token_refused',
      'bad_status',
      'new_run',
      'rotated',
      'bus_failed',
      'internal_error',
    ],
  ],
}

async function scrape(url: string): Promise<Map<string, Family>> {
  const res = await fetch(`${url}/metrics`)
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
  return parseExposition(await res.text())
}

function assertTypes(families: Map<string, Family>, expected: Record<string, string>): void {
  for (const [name, type] of Object.entries(expected))
    assert.equal(families.get(name)?.type, type, `${name} is a ${type}`)
}

test('every metric is the gateway’s (krg_) or a standard process/Node.js one, with its type and help', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const families = await scrape(gw.url)
  assertTypes(families, { ...gatewayFamilies, ...standardFamilies })
  for (const [name, family] of families) {
    assert.match(name, /^(krg_|process_|nodejs_)/, `${name} is prefixed`)
    assert.ok(family.help.length > 0, `${name} has help`)
  }
  assert.equal(families.get('krg_redis_connected'), undefined, 'no Redis metrics without Redis')
  assert.equal(families.get('krg_degraded'), undefined)
})

test('krg_build_info names the version and Node.js; known reasons are exported at 0 before any event', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const families = await scrape(gw.url)
  assert.equal(sampleValue(families, 'krg_build_info', { version: pkg.version, node: process.version }), 1)
  for (const [name, [label, values]] of Object.entries(zeroed))
    for (const value of values)
      assert.equal(sampleValue(families, name, { [label]: value }), 0, `${name} ${value}`)
  for (const source of ['file', 'admin', 'demo'])
    assert.equal(sampleValue(families, 'krg_sessions_registered', { source }), 0)
})

test('requests are counted and timed by route; sessions by source; a refused credential by reason', async (t) => {
  const { gw, token } = await startStack(t)
  const admin = await bearer({ roles: ['admin'] })
  const put = await fetch(`${gw.url}/admin/sessions/s2`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: 'http://127.0.0.1:9/', team: 'blue', messagingToken: 'x' }),
  })
  assert.equal(put.status, 201)
  const inbox = await fetch(`${gw.url}/desktop/s1/mcp/inbox`, {
    headers: { authorization: `Bearer ${token}` },
  })
  assert.equal(inbox.status, 200)
  await inbox.arrayBuffer()
  const refused = await fetch(`${gw.url}/desktop/s1/mcp/inbox`, { headers: { authorization: 'Bearer nope' } })
  assert.equal(refused.status, 401)
  await refused.arrayBuffer()

  const families = await scrape(gw.url)
  const inboxLabels = { route: '/desktop/:kasmId/mcp/inbox', method: 'GET', status: '200' }
  assert.equal(sampleValue(families, 'krg_http_requests_total', inboxLabels), 1)
  assert.equal(sampleValue(families, 'krg_http_request_duration_seconds_count', inboxLabels), 1)
  assert.equal(
    sampleValue(families, 'krg_http_request_duration_seconds_bucket', { ...inboxLabels, le: '+Inf' }),
    1,
  )
  assert.ok((sampleValue(families, 'krg_http_request_duration_seconds_sum', inboxLabels) ?? 0) > 0)
  assert.equal(sampleValue(families, 'krg_auth_failures_total', { reason: 'malformed' }), 1)
  assert.equal(sampleValue(families, 'krg_sessions_registered', { source: 'admin' }), 2)
})

test('an event stream the client ends is counted, timed and logged as "request completed" when it ends', async (t) => {
  const logs = captureLogs('info')
  const { gw, token, eventsUrl } = await startStack(t, {}, {}, { logger: logs.logger })
  const client = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  assert.equal(client.status, 200)
  await until('the stream delivers', () => client.raw.length > 0)
  const labels = { route: '/desktop/:kasmId/mcp/events', method: 'GET', status: '200' }
  assert.equal(
    sampleValue(await scrape(gw.url), 'krg_http_requests_total', labels),
    undefined,
    'not while open',
  )

  client.close()
  await until('the stream is counted', async () => {
    return sampleValue(await scrape(gw.url), 'krg_http_requests_total', labels) === 1
  })
  const families = await scrape(gw.url)
  assert.equal(sampleValue(families, 'krg_http_stream_duration_seconds_count', { route: labels.route }), 1)
  assert.equal(
    sampleValue(families, 'krg_http_request_duration_seconds_count', labels),
    undefined,
    'a stream’s lifetime is no request latency',
  )
  const records = logs.records()
  const incoming = records.find(
    (r) =>
      r.msg === 'incoming request' &&
      (r.req as { url?: string } | undefined)?.url === '/desktop/s1/mcp/events',
  )
  assert.ok(incoming, 'the stream was logged when it came in')
  const completed = records.find((r) => r.msg === 'request completed' && r.reqId === incoming.reqId)
  assert.ok(completed, `a completion line for ${String(incoming.reqId)}:\n${logs.text()}`)
  assert.deepEqual(completed.res, { statusCode: 200 })
  assert.equal(completed.stream, true)
  assert.ok(typeof completed.responseTime === 'number' && completed.responseTime > 0)
})

test('the overview stream is counted and timed when it ends, like an event stream', async (t) => {
  const { gw, token } = await startStack(t)
  const client = await openSse(`${gw.url}/api/overview`, { authorization: `Bearer ${token}` })
  assert.equal(client.status, 200)
  await until('the overview delivers', () => client.raw.length > 0)
  const labels = { route: '/api/overview', method: 'GET', status: '200' }
  assert.equal(
    sampleValue(await scrape(gw.url), 'krg_http_requests_total', labels),
    undefined,
    'not while open',
  )
  client.close()
  await until('the overview stream is counted', async () => {
    return sampleValue(await scrape(gw.url), 'krg_http_requests_total', labels) === 1
  })
  assert.equal(
    sampleValue(await scrape(gw.url), 'krg_http_stream_duration_seconds_count', { route: labels.route }),
    1,
  )
})

test('cluster mode adds the Redis and cluster families, with known labels at 0', async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const gw = await startGateway({
    REDIS_URL: REDIS_TEST_URL,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    GATEWAY_REDIS_PREFIX: prefix,
  })
  t.after(() => gw.close())
  const families = await scrape(gw.url)
  assertTypes(families, { ...gatewayFamilies, ...clusterFamilies })
  for (const connection of ['command', 'live', 'subscriber']) {
    assert.equal(sampleValue(families, 'krg_redis_connected', { connection }), 1)
    assert.equal(sampleValue(families, 'krg_redis_reconnects_total', { connection }), 0)
  }
  assert.equal(sampleValue(families, 'krg_degraded'), 0)
  for (const result of ['stored', 'fenced', 'error'])
    assert.equal(sampleValue(families, 'krg_cluster_appends_total', { result }), 0)
  for (const event of ['acquired', 'lost', 'released'])
    assert.equal(sampleValue(families, 'krg_cluster_lease_changes_total', { event }), 0)
})
