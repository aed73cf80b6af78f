import assert from 'node:assert/strict'
import diagnostics from 'node:diagnostics_channel'
import { once } from 'node:events'
import net from 'node:net'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startGateway } from '../helpers/gateway.ts'
import { testEnv } from '../helpers/jwt.ts'
import { startProxy, waitFor } from '../upstream/support.ts'

/** A raw connection to the gateway; `closed` is true once the gateway closed it. */
async function connect(
  port: number,
): Promise<{ socket: net.Socket; closed: () => boolean; data: () => string }> {
  const socket = net.connect(port, '127.0.0.1')
  let closed = false
  let data = ''
  socket.on('data', (d: Buffer) => {
    data += d.toString('utf8')
  })
  socket.on('error', () => {})
  socket.on('close', () => {
    closed = true
  })
  await once(socket, 'connect')
  return { socket, closed: () => closed, data: () => data }
}

test('shutdown closes connections that never sent a whole request, and lets a request in flight finish, then closes its connection', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const port = Number(new URL(gw.url).port)
  let answer: (() => void) | undefined
  echo.handler = (_req, res) => {
    answer = () => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end('the whole file')
    }
  }
  const busy = await connect(port)
  busy.socket.write(
    `GET /desktop/k1/mcp/artifacts/notes.txt HTTP/1.1\r\nhost: gw\r\nauthorization: ${auth.operator}\r\n\r\n`,
  )
  await waitFor('the request to reach the runtime', () => answer)
  // What a browser's preconnect leaves: a connection that has sent nothing, and one stopped mid-headers.
  const preconnected = await connect(port)
  const halfway = await connect(port)
  halfway.socket.write('GET /healthz HTTP/1.1\r\nhost: gw\r\n')

  let closed = false
  const closing = gw.app.close().then(() => {
    closed = true
  })
  try {
    await waitFor('the silent connections to be closed', () => preconnected.closed() && halfway.closed())
  } catch (err) {
    // Failing, not hanging: the shutdown would wait for them (and the request in flight) past the test.
    preconnected.socket.destroy()
    halfway.socket.destroy()
    answer?.()
    throw err
  }
  assert.equal(preconnected.data(), '', 'nothing was answered on a connection that asked nothing')
  assert.equal(halfway.data(), '')
  assert.equal(closed, false, 'the shutdown waits for the request in flight')
  assert.equal(busy.closed(), false)
  answer?.()

  // Promised keep-alive, the answered connection would hold the drain for the keep-alive timeout (72 s).
  await waitFor('the answered connection to be closed', () => busy.closed())
  assert.match(busy.data(), /^HTTP\/1\.1 200 /)
  assert.ok(busy.data().endsWith('the whole file\r\n0\r\n\r\n'), 'the whole answer came before the close')
  await closing
})

test('the shutdown’s subscription to node:http’s response channel ends with the server, listened on or not', async () => {
  const finish = diagnostics.channel('http.server.response.finish')
  const listening = await startGateway()
  await listening.close()
  assert.equal(finish.hasSubscribers, false, 'a closed gateway leaves no subscriber behind')
  // An app only ever injected into (tests, tools) never listened: its close still releases the channel.
  const injected = await buildApp(loadConfig(testEnv()))
  await injected.ready()
  assert.equal((await injected.inject('/healthz')).statusCode, 200)
  await injected.close()
  assert.equal(finish.hasSubscribers, false)
})
