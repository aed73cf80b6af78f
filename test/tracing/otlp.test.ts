import assert from 'node:assert/strict'
import http from 'node:http'
import { test } from 'node:test'
import {
  type Cluster,
  request,
  startCluster,
  startReplica,
  stopReplicas,
} from '../cluster/cluster-harness.ts'
import { until } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp.ts'

const SERVER = 2
const CLIENT = 3
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PROXY_SPAN = '00f067aa0ba902b7'
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/

/** POSTs a message to k1 of the replica at `url` (forwarded to the cluster's runtime) with extra headers. */
function postMessage(cluster: Cluster, url: string, headers: Record<string, string>, key: string) {
  return request(`${url}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ run: cluster.runtime.run, key, text: 'hello' }),
  })
}

/**
 * Opens the session's event stream as a viewer; resolves, once its answer has begun, to the function that makes
 * the viewer go away.
 */
function watchEvents(url: string, authorization: string): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { authorization }, agent: false }, (res) => {
      res.resume()
      resolve(() => req.destroy())
    })
    req.on('error', (err) => {
      if (!req.destroyed) reject(err)
    })
  })
}

test('spans arrive over OTLP/JSON: the request, its upstream call as the child, the reader and Redis', async (t) => {
  const receiver = await startOtlpReceiver()
  t.after(() => receiver.close())
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'krg-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  }
  const cluster = await startCluster(t, 1, { ...otel, GATEWAY_TRUST_PROXY: 'loopback' })
  await cluster.addSession('k1')
  const [gw] = cluster.replicas
  assert.ok(gw)
  const operator = `Bearer ${await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] })}`
  const spansWhere = (pred: (s: ReceivedSpan) => boolean) => receiver.spans.filter(pred)

  // A request from the ingress (a trusted proxy) that is part of a trace already.
  const sent = await postMessage(
    cluster,
    gw.url,
    { authorization: operator, traceparent: `00-${TRACE}-${PROXY_SPAN}-01`, 'x-request-id': 'ingress-req-1' },
    'k-1',
  )
  assert.equal(sent.status, 202, sent.body)
  const server = await until('the request span', () =>
    spansWhere((s) => s.kind === SERVER && s.attributes['krg.request_id'] === 'ingress-req-1').at(0),
  )
  assert.equal(server.service, 'krg-under-test')
  assert.equal(server.name, 'POST /desktop/:kasmId/mcp/messages')
  assert.equal(server.traceId, TRACE, 'the proxy trace continues')
  assert.equal(server.parentSpanId, PROXY_SPAN, "the proxy's span is the parent")
  assert.equal(server.attributes['http.response.status_code'], 202)
  assert.equal(server.attributes['http.route'], '/desktop/:kasmId/mcp/messages')

  const upstream = await until('the upstream span', () =>
    spansWhere((s) => s.kind === CLIENT && s.parentSpanId === server.spanId).at(0),
  )
  assert.equal(upstream.name, 'POST messages')
  assert.equal(upstream.traceId, TRACE)
  assert.equal(upstream.attributes['http.response.status_code'], 202)

  const atRuntime = cluster.runtime.received.filter((r) => r.method === 'POST' && r.url === '/messages')
  const header = String(atRuntime.at(-1)?.headers.traceparent)
  const [, traceId, parentId] = TRACEPARENT.exec(header) ?? []
  assert.equal(traceId, TRACE, header)
  assert.equal(parentId, upstream.spanId, "the runtime's parent is the upstream span")
  assert.equal(atRuntime.at(-1)?.headers['x-request-id'], 'ingress-req-1')

  // The event reader: its connect is a client span whose traceparent the runtime got; the lease and the
  // appends are Redis spans.
  // The viewer stays until the reader has connected and appended: the replicas linger 0 ms, so a viewer that
  // left at its first bytes could stop the reader before it connected (seen on a loaded machine).
  const leave = await watchEvents(`${gw.url}/desktop/k1/mcp/events`, operator)
  t.after(leave)
  const connect = await until('the reader connect span', () =>
    spansWhere((s) => s.name === 'GET events' && s.attributes['krg.kasm_id'] === 'k1').at(0),
  )
  assert.equal(connect.kind, CLIENT)
  assert.equal(connect.attributes['http.response.status_code'], 200)
  const eventsAtRuntime = cluster.runtime.received.filter((r) => r.url.startsWith('/events'))
  assert.ok(
    eventsAtRuntime.some((r) => TRACEPARENT.exec(String(r.headers.traceparent))?.[2] === connect.spanId),
    'the runtime got the connect span as parent',
  )
  // The reader's lease is named by the session (jobs such as `reseal` take leases too).
  const acquire = await until('the lease span', () =>
    spansWhere((s) => s.name === 'redis lease acquire' && s.attributes['krg.lease'] === 'k1').at(0),
  )
  assert.equal(acquire.attributes['db.system.name'], 'redis')
  assert.equal(acquire.kind, CLIENT)
  await until('an append span', () =>
    spansWhere((s) => s.name === 'redis events append' && s.attributes['krg.kasm_id'] === 'k1').at(0),
  )
  leave()

  // A refused request is an error span carrying its code; 4xx is the client's, so not an error status.
  const refused = await request(`${gw.url}/desktop/nope/mcp/messages`, {
    method: 'POST',
    headers: { authorization: operator, 'content-type': 'application/json', 'x-request-id': 'ingress-req-2' },
    body: JSON.stringify({ run: 'r', key: 'k', text: 'x' }),
  })
  assert.equal(refused.status, 404)
  const refusedSpan = await until('the refused request span', () =>
    spansWhere((s) => s.attributes['krg.request_id'] === 'ingress-req-2').at(0),
  )
  assert.equal(refusedSpan.attributes['error.type'], 'session_not_found')
  assert.equal(refusedSpan.attributes['http.response.status_code'], 404)
  assert.equal(refusedSpan.parentSpanId, '', 'no traceparent: a new trace')

  // A client the gateway does not trust cannot graft its request onto a trace of its choosing.
  const untrusted = await startReplica(1, { ...cluster.env, GATEWAY_TRUST_PROXY: 'false' })
  t.after(() => stopReplicas([untrusted]))
  const direct = await postMessage(
    cluster,
    untrusted.url,
    { authorization: operator, traceparent: `00-${TRACE}-${PROXY_SPAN}-01` },
    'k-2',
  )
  assert.equal(direct.status, 202, direct.body)
  const id = String(direct.headers['x-request-id'])
  const directSpan = await until('the untrusted request span', () =>
    spansWhere((s) => s.attributes['krg.request_id'] === id).at(0),
  )
  assert.notEqual(directSpan.traceId, TRACE)
  assert.equal(directSpan.parentSpanId, '')
  const last = cluster.runtime.received.filter((r) => r.url === '/messages').at(-1)
  assert.notEqual(TRACEPARENT.exec(String(last?.headers.traceparent))?.[1], TRACE)

  // The harness polled /readyz until each replica was ready: probes make no spans.
  assert.deepEqual(
    spansWhere((s) => ['/healthz', '/readyz', '/metrics'].includes(String(s.attributes['http.route']))),
    [],
  )

  // Without a protocol, spans go as protobuf (the specification's default).
  const protoReceiver = await startOtlpReceiver()
  t.after(() => protoReceiver.close())
  const { OTEL_EXPORTER_OTLP_PROTOCOL: _, ...defaults } = cluster.env
  const proto = await startReplica(2, { ...defaults, OTEL_EXPORTER_OTLP_ENDPOINT: protoReceiver.url })
  t.after(() => stopReplicas([proto]))
  assert.equal(
    (await request(`${proto.url}/desktop/k1/mcp/inbox`, { headers: { authorization: operator } })).status,
    200,
  )
  await until('a protobuf export', () => protoReceiver.contentTypes.includes('application/x-protobuf'))
})

test('tracing off: no exports, and a trusted proxy traceparent reaches the runtime unchanged', async (t) => {
  const receiver = await startOtlpReceiver()
  t.after(() => receiver.close())
  // OTEL_SDK_DISABLED wins over an endpoint, as the specification says.
  const cluster = await startCluster(t, 1, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SDK_DISABLED: 'true',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    GATEWAY_TRUST_PROXY: 'loopback',
  })
  await cluster.addSession('k1')
  const [gw] = cluster.replicas
  assert.ok(gw)
  const operator = `Bearer ${await bearer({ sub: 'bob', roles: ['operator'], teams: ['blue'] })}`
  const traceparent = `00-${TRACE}-${PROXY_SPAN}-01`
  const post = (headers: Record<string, string>, key: string) =>
    postMessage(cluster, gw.url, { authorization: operator, ...headers }, key)
  const lastAtRuntime = () => cluster.runtime.received.filter((r) => r.url === '/messages').at(-1)?.headers
  assert.equal((await post({ traceparent, tracestate: 'vendor=abc' }, 'k-1')).status, 202)
  assert.equal(lastAtRuntime()?.traceparent, traceparent)
  assert.equal(lastAtRuntime()?.tracestate, 'vendor=abc')
  // A malformed one (all-zero trace id) is not passed on.
  assert.equal((await post({ traceparent: `00-${'0'.repeat(32)}-${PROXY_SPAN}-01` }, 'k-2')).status, 202)
  assert.equal(lastAtRuntime()?.traceparent, undefined)
  // The shutdown would flush any span: after it, still nothing has arrived.
  gw.child.kill('SIGTERM')
  assert.deepEqual(await gw.exited, { code: 0, signal: null })
  assert.deepEqual(receiver.contentTypes, [])
})
