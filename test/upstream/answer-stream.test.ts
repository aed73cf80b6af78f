import assert from 'node:assert/strict'
import { once } from 'node:events'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import { test } from 'node:test'
import { MESSAGING_TOKEN, send, startProxy, waitFor } from './support.ts'

/** Starts a GET of the artifact route and resolves with the answer's head, its body still streaming. */
function startRead(origin: string, authorization: string): Promise<IncomingMessage> {
  const url = new URL(origin)
  return new Promise((resolve, reject) => {
    const req = http.get(
      {
        host: url.hostname,
        port: url.port,
        path: '/desktop/k1/mcp/artifacts/r1/big.log',
        headers: { authorization },
        agent: false,
      },
      resolve,
    )
    req.on('error', reject)
  })
}

/** The gateway is fine after a broken answer: the same route answers in full. */
async function servedAgain(
  setup: Awaited<ReturnType<typeof startProxy>>,
  file: string,
  headers: Record<string, string>,
): Promise<void> {
  setup.echo.handler = (_req, answer) => {
    answer.writeHead(200, { 'content-type': 'text/plain', ...headers })
    answer.end('whole')
  }
  const next = await send(setup.gw.url, {
    path: `/desktop/k1/mcp/artifacts/r1/${file}`,
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(next.status, 200)
  assert.equal(next.text, 'whole')
}

test('a runtime body that breaks mid-answer cuts the client answer short; the next request is served', async (t) => {
  const setup = await startProxy(t)
  setup.echo.handler = (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100000' })
    res.write(Buffer.alloc(1000, 0x61))
    // The runtime dies a few bytes in: the client must not get a short body that looks whole.
    setImmediate(() => req.socket.destroy())
  }
  const res = await startRead(setup.gw.url, setup.auth.viewer)
  assert.equal(res.statusCode, 200)
  let received = 0
  res.on('data', (chunk: Buffer) => {
    received += chunk.length
  })
  const [outcome] = await Promise.race([
    once(res, 'end').then(() => ['ended'] as const),
    once(res, 'aborted').then(() => ['aborted'] as const),
    once(res, 'error').then(() => ['aborted'] as const),
  ])
  assert.equal(outcome, 'aborted')
  assert.ok(received < 100_000, `the client got ${received} bytes`)

  await servedAgain(setup, 'big.log', {})
})

test('a client that leaves mid-answer stops the upstream answer', async (t) => {
  const setup = await startProxy(t)
  let upstream: ServerResponse | undefined
  setup.echo.handler = (_req, res) => {
    upstream = res
    res.writeHead(200, { 'content-type': 'text/plain' })
    // A long answer, sent a chunk at a time: only the gateway's giving up can end it early.
    res.write(Buffer.alloc(1000, 0x61))
  }
  const res = await startRead(setup.gw.url, setup.auth.viewer)
  assert.equal(res.statusCode, 200)
  const closed = waitFor(
    'the upstream answer closed unfinished',
    () => upstream?.destroyed === true && !upstream.writableFinished,
  )
  res.destroy()
  await closed
})

test('a body echoing the token across chunks is masked when relayed chunk by chunk', async (t) => {
  const setup = await startProxy(t)
  const cut = 10
  setup.echo.handler = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write(`before ${MESSAGING_TOKEN.slice(0, cut)}`)
    setTimeout(() => res.end(`${MESSAGING_TOKEN.slice(cut)} after`), 20)
  }
  const res = await send(setup.gw.url, {
    path: '/desktop/k1/mcp/artifacts/r1/big.log',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(res.status, 200)
  assert.equal(res.text, `before ${'*'.repeat(MESSAGING_TOKEN.length)} after`)
})

test('a small body (read whole) that breaks mid-answer is a 502 with none of its headers; the next is served', async (t) => {
  const setup = await startProxy(t)
  setup.echo.handler = (req, res) => {
    res.writeHead(200, {
      'content-type': 'text/plain',
      'content-length': '4096',
      'content-disposition': 'attachment; filename="half.log"',
    })
    res.write(Buffer.alloc(1000, 0x61))
    setImmediate(() => req.socket.destroy())
  }
  const broken = await send(setup.gw.url, {
    path: '/desktop/k1/mcp/artifacts/r1/half.log',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(broken.status, 502)
  assert.equal(JSON.parse(broken.text).error, 'upstream_unreachable')
  assert.equal(broken.headers['content-disposition'], undefined, 'no header of the answer that broke off')

  // Fewer bytes than its Content-Length, then the connection closed cleanly: not passed on as whole either.
  setup.echo.handler = (req, res) => {
    req.socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\nshort')
    res.destroy()
  }
  const short = await send(setup.gw.url, {
    path: '/desktop/k1/mcp/artifacts/r1/half.log',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(short.status, 502)
  assert.match(JSON.parse(short.text).error, /^upstream_(unreachable|bad_answer)$/)

  await servedAgain(setup, 'half.log', { 'content-length': '5' })
})

test('a small body echoing the token across chunks is masked when read whole', async (t) => {
  const setup = await startProxy(t)
  const cut = 10
  const body = `before ${MESSAGING_TOKEN} after`
  setup.echo.handler = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(body)) })
    res.write(`before ${MESSAGING_TOKEN.slice(0, cut)}`)
    setTimeout(() => res.end(`${MESSAGING_TOKEN.slice(cut)} after`), 20)
  }
  const res = await send(setup.gw.url, {
    path: '/desktop/k1/mcp/artifacts/r1/small.log',
    headers: { authorization: setup.auth.viewer },
  })
  assert.equal(res.status, 200)
  assert.equal(res.text, `before ${'*'.repeat(MESSAGING_TOKEN.length)} after`)
  assert.equal(res.headers['content-length'], String(Buffer.byteLength(body)))
})
