import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import { Counter, type Registry } from 'prom-client'
import { SocketTakeover } from '../../src/events/takeover.ts'
import { captureLogs } from '../sessions/capture-logs.ts'
import { eventsAtLeast, openSse, startStack, until } from './helpers.ts'

async function takeovers(registry: Registry): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric('krg_socket_takeovers_total')
  assert.ok(metric)
  const out: Record<string, number> = {}
  for (const v of (await metric.get()).values) out[String(v.labels.path)] = v.value
  return out
}

// The test that notices a Node (or Fastify) whose internals no longer allow the fast path: run on every leg.
test(`a viewer stream takes its socket over from node:http on this Node (${process.version})`, async (t) => {
  const logs = captureLogs('warn')
  const { rt, gw, token, eventsUrl } = await startStack(t, {}, {}, { logger: logs.logger })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  assert.equal(viewer.status, 200)
  await eventsAtLeast(viewer, 1)
  rt.emit('log', { level: 'info', msg: 'after the takeover' })
  await eventsAtLeast(viewer, 2)
  // The console's overview stream is the other route that takes its socket over.
  const overview = await openSse(`${gw.url}/api/overview`, { authorization: `Bearer ${token}` })
  t.after(() => overview.close())
  assert.equal(overview.status, 200)
  await until('the overview snapshot', () => overview.events.length >= 1)
  assert.deepEqual(await takeovers(gw.app.metrics.registry), { fast: 2, fallback: 0, off: 0 })
  assert.doesNotMatch(logs.text(), /socket takeover fell back/)
})

test('GATEWAY_SOCKET_TAKEOVER=off: the stream works on the socket as it is, counted as off', async (t) => {
  const { rt, gw, token, eventsUrl } = await startStack(t, { GATEWAY_SOCKET_TAKEOVER: 'off' })
  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  assert.equal(viewer.status, 200)
  await eventsAtLeast(viewer, 1)
  rt.emit('log', { level: 'info', msg: 'on the untouched socket' })
  await eventsAtLeast(viewer, 2)
  assert.equal(viewer.events[1]?.event, 'log')
  assert.deepEqual(await takeovers(gw.app.metrics.registry), { fast: 0, fallback: 0, off: 1 })
})

test('a socket node:http no longer holds falls back: counted each time, logged once with the failed check', async (t) => {
  const logs = captureLogs('warn')
  const log = pino({ level: 'warn' }, logs.logger.stream) as unknown as FastifyBaseLogger
  const counter = new Counter({ name: 'takeovers', help: 'test', labelNames: ['path'], registers: [] })
  const takeover = new SocketTakeover(true, counter, log)
  const server = http.createServer(async (req, res) => {
    // As in a Fastify handler, the takeover runs after the parser's callback returned (see takeover.ts).
    await Promise.resolve()
    let socket: ReturnType<SocketTakeover['take']>
    if (req.url === '/twice') {
      takeover.take(req, res)
      // Its parser is gone now: the second takeover finds none.
      socket = takeover.take(req, res)
    } else {
      res.detachSocket(req.socket)
      socket = takeover.take(req, res)
    }
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const { port } = server.address() as AddressInfo
  for (const path of ['/twice', '/detached']) {
    const res = await fetch(`http://127.0.0.1:${port}${path}`)
    assert.equal(await res.text(), 'ok')
  }
  const counted = Object.fromEntries((await counter.get()).values.map((v) => [v.labels.path, v.value]))
  assert.deepEqual(counted, { fast: 1, fallback: 2 })
  const warned = logs.records().filter((r) => String(r.msg).startsWith('socket takeover fell back'))
  assert.equal(warned.length, 1, logs.text())
  assert.equal(warned[0]?.why, 'no_parser')
  assert.equal(warned[0]?.level, 40)
})
