import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { startProxy, waitFor } from '../upstream/support.ts'

const MAX = 64 * 1024
const CT = 'multipart/form-data; boundary=----x'

/**
 * A client that sends its whole body before it reads anything (as many HTTP/1.1 clients do), then reads the
 * answer: it sees the gateway's answer only if the gateway read past the rest of the body instead of
 * resetting the connection under it.
 */
function sendAllThenRead(
  port: number,
  head: string,
  body: { chunk: Buffer; count: number; chunked: boolean; last?: Buffer },
): Promise<{ answer: string; error: string | null }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    socket.pause()
    let error: string | null = null
    let answer = ''
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? err.message
    })
    socket.on('close', () => resolve({ answer, error }))
    socket.on('connect', async () => {
      socket.write(head)
      for (let i = 0; i < body.count && !socket.destroyed; i++) {
        const chunk = i === body.count - 1 && body.last !== undefined ? body.last : body.chunk
        const framed = body.chunked
          ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])
          : chunk
        if (!socket.write(framed)) {
          await new Promise<void>((r) => {
            socket.once('drain', r)
            socket.once('close', r)
          })
        }
      }
      if (body.chunked && !socket.destroyed) socket.write('0\r\n\r\n')
      socket.on('data', (d: Buffer) => {
        answer += d.toString('utf8')
      })
      socket.on('end', () => socket.end())
      socket.resume()
    })
  })
}

function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)
}

test('an upload refused before it is read (413) reaches a client that sends everything first', async (t) => {
  // The default limit (8 MiB) and a 12 MiB upload: more than the kernel's buffers hold, so without the
  // lingering read the client is still writing when the connection is reset, and loses the answer.
  const { gw, echo, auth } = await startProxy(t)
  const port = Number(new URL(gw.url).port)
  const total = 12 * 1024 * 1024
  for (let i = 0; i < 3; i++) {
    const { answer, error } = await sendAllThenRead(
      port,
      `POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.operator}\r\n` +
        `Content-Type: ${CT}\r\nContent-Length: ${total}\r\n\r\n`,
      { chunk: Buffer.alloc(64 * 1024, 0x61), count: total / (64 * 1024), chunked: false },
    )
    assert.equal(statusOf(answer), 413, `attempt ${i}: ${error ?? ''} ${answer.slice(0, 80)}`)
    assert.match(answer, /"error":"payload_too_large"/)
    assert.match(answer, /\r\nconnection: close\r\n/i)
  }
  assert.equal(echo.received.length, 0)
})

test('a request pipelined behind a refused body is not served', async (t) => {
  const { gw, echo, auth } = await startProxy(t)
  const port = Number(new URL(gw.url).port)
  const total = 10 * 1024 * 1024
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  const { answer } = await sendAllThenRead(
    port,
    `POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.operator}\r\n` +
      `Content-Type: ${CT}\r\nContent-Length: ${total}\r\n\r\n`,
    {
      chunk,
      count: total / chunk.length + 1,
      chunked: false,
      // The last write is the body's end and, in the same bytes, the next request.
      last: Buffer.from(
        `GET /desktop/k1/mcp/inbox HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.operator}\r\n\r\n`,
      ),
    },
  )
  assert.equal(statusOf(answer), 413)
  assert.equal(answer.match(/HTTP\/1\.1 /g)?.length, 1, 'one answer only')
  assert.equal(echo.received.length, 0, 'the pipelined request never reached the runtime')
})

test('an upload cut at the limit mid-way (chunked) and an anonymous upload (401) reach the client too', async (t) => {
  // A 1 MiB limit, not the default 8 MiB: the gateway reads past the rest for at most 30 s (as nginx does), and
  // on a loaded machine 12 MiB through one test process has taken longer than that.
  const { gw, echo, auth } = await startProxy(t, { GATEWAY_MAX_ATTACHMENT_BYTES: String(1024 * 1024) })
  const port = Number(new URL(gw.url).port)
  // 1.5 MiB against the 1 MiB limit, chunked: the gateway reads 1 MiB into the upstream, then refuses.
  const body = { chunk: Buffer.alloc(32 * 1024, 0x62), count: 48, chunked: true }
  const cut = await sendAllThenRead(
    port,
    `POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.operator}\r\n` +
      `Content-Type: ${CT}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    body,
  )
  assert.equal(statusOf(cut.answer), 413, `${cut.error ?? ''} ${cut.answer.slice(0, 80)}`)
  await waitFor('the upstream upload to be cut', () => echo.received[0]?.aborted === true)
  const anonymous = await sendAllThenRead(
    port,
    `POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gw\r\nContent-Type: ${CT}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    body,
  )
  assert.equal(statusOf(anonymous.answer), 401, `${anonymous.error ?? ''} ${anonymous.answer.slice(0, 80)}`)
})

test('the lingering read is bounded: a client that never stops sending is cut off', async (t) => {
  const { gw, auth } = await startProxy(t, { GATEWAY_MAX_ATTACHMENT_BYTES: String(MAX) })
  const port = Number(new URL(gw.url).port)
  const chunk = Buffer.alloc(64 * 1024, 0x63)
  const outcome = await new Promise<{ answer: string; sent: number; cut: boolean }>((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let answer = ''
    let sent = 0
    let cut = false
    socket.on('data', (d: Buffer) => {
      answer += d.toString('utf8')
    })
    socket.on('error', () => {
      cut = true
    })
    socket.on('close', () => resolve({ answer, sent, cut: cut || sent < 256 * 1024 * 1024 }))
    socket.on('connect', async () => {
      socket.write(
        `POST /desktop/k1/mcp/attachments HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.operator}\r\n` +
          `Content-Type: ${CT}\r\nContent-Length: ${1024 * 1024 * 1024}\r\n\r\n`,
      )
      // Up to 256 MiB: far past the bound (twice the upload limit), so only the gateway can end this.
      while (!socket.destroyed && sent < 256 * 1024 * 1024) {
        sent += chunk.length
        if (!socket.write(chunk)) {
          await new Promise<void>((r) => {
            socket.once('drain', r)
            socket.once('close', r)
          })
        }
      }
      socket.end()
    })
  })
  assert.equal(statusOf(outcome.answer), 413)
  assert.ok(outcome.cut, `the gateway read all ${outcome.sent} bytes`)
  assert.ok(outcome.sent < 64 * 1024 * 1024, `the client could send ${outcome.sent} bytes`)
})

test('a gateway closes cleanly while a refused client still holds its connection', async (t) => {
  const { gw } = await startProxy(t)
  const res = await fetch(`${gw.url}/desktop/k1/mcp/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ run: 'r', key: 'k', text: 'hello' }),
  })
  assert.equal(res.status, 401)
  assert.equal(res.headers.get('connection'), 'close')
  // Shutdown right away: the server's connection bookkeeping must still be sound.
  await gw.close()
})
