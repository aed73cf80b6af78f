import assert from 'node:assert/strict'
import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import net from 'node:net'
import { type TestContext, test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { type Replica, request, startReplica, stopReplicas } from '../cluster/cluster-harness.ts'
import { openSse, type SseClient } from '../events/helpers.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * A replica at its descriptor limit, as a real child process under a low `ulimit -n`: before the cap, an
 * idle-viewer crowd or connections that never finish their headers made `accept()` and the pressure sample
 * fail with EMFILE, and the sample's throw ended the process, dropping every viewer.
 */

/** The descriptor limit of the replicas below: cap 256 - 128 (the minimum reserve), half-open share 32. */
const MAX_OPEN_FILES = 256
const CAP = 128
const HALF_OPEN = 32

const TOKEN = 'messaging-token-for-connection-limit-tests'

async function replica(t: TestContext, env: Record<string, string> = {}): Promise<Replica> {
  const r = await startReplica(
    0,
    testEnv({ LOG_LEVEL: 'warn', GATEWAY_MAX_STREAMS_PER_OPERATOR: '1000', ...env }),
    { maxOpenFiles: MAX_OPEN_FILES },
  )
  t.after(() => stopReplicas([r]))
  return r
}

async function metric(r: Replica, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await request(`${r.url}/metrics`)
  assert.equal(res.status, 200)
  const value = sampleValue(parseExposition(res.body), name, labels)
  assert.ok(value !== undefined, `${name} is exported`)
  return value
}

/** A raw connection; `closed()` says whether it has closed (by the replica: the test closes none early). */
async function connectRaw(r: Replica): Promise<{ socket: net.Socket; closed: () => boolean }> {
  const socket = net.connect(Number(new URL(r.url).port), '127.0.0.1')
  let closed = false
  socket.on('error', () => {})
  socket.on('close', () => {
    closed = true
  })
  await once(socket, 'connect')
  return { socket, closed: () => closed }
}

test('idle viewers past the cap are refused 503 with Retry-After; the viewers in keep streaming and the process lives', async (t) => {
  const runtime = await startSimulatedRuntime({ messagingToken: TOKEN, pingIntervalMs: 60_000 })
  t.after(() => runtime.close())
  const r = await replica(t)
  const admin = `Bearer ${await bearer({ sub: 'alice', roles: ['admin'], teams: ['*'] })}`
  const put = await request(`${r.url}/admin/sessions/k`, {
    method: 'PUT',
    headers: { authorization: admin, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: TOKEN }),
  })
  assert.ok(put.status === 201 || put.status === 200, put.body)
  const auth = {
    authorization: `Bearer ${await bearer({ sub: 'bob', teams: ['blue'] }, { expiresIn: '1h' })}`,
  }
  const url = `${r.url}/desktop/k/mcp/events`

  const viewers: SseClient[] = []
  t.after(() => {
    for (const v of viewers) v.close()
  })
  let refused: SseClient | undefined
  // One at a time, until the first refusal: the connections of the requests above may still be closing.
  while (refused === undefined && viewers.length <= CAP) {
    const v = await openSse(url, auth)
    if (v.status === 200) viewers.push(v)
    else refused = v
  }
  assert.ok(refused, `a viewer past the cap is refused (${viewers.length} got in)`)
  assert.ok(
    viewers.length >= CAP - 4 && viewers.length <= CAP,
    `${viewers.length} viewers in, the cap ${CAP}`,
  )
  for (const v of [refused, await openSse(url, auth), await openSse(url, auth)]) {
    assert.equal(v.status, 503)
    assert.equal(v.headers['retry-after'], '5')
    assert.equal(v.headers.connection, 'close')
    assert.equal((v.body as { error?: string }).error, 'too_many_connections')
  }
  // The probes are served past the cap: the orchestrator must not restart a full replica.
  assert.equal((await request(`${r.url}/healthz`)).status, 200)

  const before = viewers.map((v) => v.events.length)
  runtime.emit('log', { level: 'info', msg: 'still streaming' })
  await waitFor(
    'every viewer in to get the new event',
    () => viewers.every((v, i) => v.events.length > (before[i] ?? 0) && !v.isEnded),
    60_000,
  )
  assert.ok(r.alive(), r.output.join('\n'))

  // Viewers that leave make room.
  for (const v of viewers.splice(0, 8)) v.close()
  const again = await waitFor(
    'a viewer to get in again',
    async () => {
      const v = await openSse(url, auth)
      if (v.status === 200) return v
      v.close()
      return null
    },
    60_000,
  )
  viewers.push(again)
  assert.equal(await metric(r, 'krg_connections_limit'), CAP, 'derived from the descriptor limit at boot')
  assert.ok((await metric(r, 'krg_connections_refused_total', { reason: 'limit' })) >= 3)
})

test('connections that never finish their headers are closed oldest first past their share; the process lives and serves', async (t) => {
  const r = await replica(t)
  // Twice the descriptor limit: unbounded, they would exhaust the replica's descriptors several times over.
  const total = 2 * MAX_OPEN_FILES
  const held: Array<{ socket: net.Socket; closed: () => boolean }> = []
  t.after(() => {
    for (const c of held) c.socket.destroy()
  })
  for (let i = 0; i < total; i++) {
    const c = await connectRaw(r)
    c.socket.write('GET /healthz HTTP/1.1\r\nhost: gateway\r\n')
    held.push(c)
  }
  const oldest = held.slice(0, total - HALF_OPEN)
  await waitFor('the oldest to be closed', () => oldest.every((c) => c.closed()))
  assert.ok(r.alive(), r.output.join('\n'))
  const newest = held.slice(total - HALF_OPEN)
  assert.equal(newest.filter((c) => c.closed()).length, 0, 'the newest, within the share, are still open')
  const res = await request(`${r.url}/healthz`)
  assert.equal(res.status, 200)
  assert.ok((await metric(r, 'krg_connections_refused_total', { reason: 'half_open' })) >= total - HALF_OPEN)
  assert.ok((await metric(r, 'krg_connections_half_open')) <= HALF_OPEN)
  assert.ok(
    r.output.some((line) => line.includes('"reason":"half_open"')),
    'logged',
  )
})

test('a replica whose descriptors are all taken lives on: the pressure sample and a refused accept() end nothing', async (t) => {
  // Caps past the descriptor limit: connections exhaust the descriptors, as before the cap.
  const r = await replica(t, { GATEWAY_MAX_CONNECTIONS: '4096', GATEWAY_MAX_HALF_OPEN_CONNECTIONS: '4096' })
  const fds = `/proc/${r.child.pid}/fd`
  const held: net.Socket[] = []
  t.after(() => {
    for (const s of held) s.destroy()
  })
  // The kernel completes connections the replica cannot accept: they connect either way.
  for (let i = 0; i < MAX_OPEN_FILES; i++) {
    const c = await connectRaw(r)
    c.socket.write('GET /healthz HTTP/1.1\r\n')
    held.push(c.socket)
  }
  // A connection that has not sent its headers is closed after the server's 30 s: on a loaded machine the first
  // ones may be closed before the last is made, so more are made until no descriptor is left.
  const exhaustedAt = await waitFor(
    'every descriptor of the replica to be taken',
    async () => {
      if (readdirSync(fds).length >= MAX_OPEN_FILES - 1) return Date.now()
      const c = await connectRaw(r)
      c.socket.write('GET /healthz HTTP/1.1\r\n')
      held.push(c.socket)
      return null
    },
    60_000,
  )
  // The pressure is sampled once a second, and @fastify/under-pressure's sample threw EMFILE out of its
  // timer at the first one: the replica must outlive a few samples with no descriptor free. Nothing inside
  // can say a sample ran, so this one wait is on the clock.
  await waitFor('three samples with no descriptor free', () => !r.alive() || Date.now() - exhaustedAt > 3000)
  assert.ok(r.alive(), r.output.join('\n'))
  for (const s of held.splice(0)) s.destroy()
  await waitFor(
    'the replica to answer again',
    async () => (await request(`${r.url}/healthz`).catch(() => null))?.status === 200,
    60_000,
  )
  assert.ok(r.alive())
})
