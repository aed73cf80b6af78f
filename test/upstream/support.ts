import assert from 'node:assert/strict'
import { once } from 'node:events'
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import type { TestContext } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { loggerOptions } from '../../src/logger.ts'
import { startGateway, type TestGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { WAIT_MS } from '../helpers/wait.ts'

/** One request as the echo server saw it; `body` grows while the request streams in. */
export interface Received {
  method: string
  url: string
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
  /** The whole body arrived (false: still streaming, or the sender aborted). */
  complete: boolean
  aborted: boolean
}

/** Answers a request the echo server has read completely. */
export type EchoHandler = (req: IncomingMessage, res: ServerResponse, received: Received) => void

/** A real node:http server on 127.0.0.1 port 0 that records every request. */
export interface Echo {
  /** e.g. `http://127.0.0.1:40000` */
  origin: string
  received: Received[]
  /** Replace to answer differently; the default answers 200 `{"ok":true}`. */
  handler: EchoHandler
  close(): Promise<void>
}

/** Starts an {@link Echo}; closed with `t.after`. */
export async function startEcho(t: TestContext): Promise<Echo> {
  const echo: Echo = {
    origin: '',
    received: [],
    handler: (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
    },
    close: async () => {},
  }
  const server = http.createServer((req, res) => {
    const record: Received = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      complete: false,
      aborted: false,
    }
    echo.received.push(record)
    req.on('data', (chunk: Buffer) => {
      record.body = Buffer.concat([record.body, chunk])
    })
    req.on('aborted', () => {
      record.aborted = true
    })
    req.on('error', () => {
      record.aborted = true
    })
    req.on('end', () => {
      record.complete = true
      echo.handler(req, res, record)
    })
  })
  server.keepAliveTimeout = 1000
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  echo.origin = `http://127.0.0.1:${port}`
  echo.close = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.after(() => echo.close())
  return echo
}

/** A raw answer. */
export interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
  text: string
}

/** Every answer {@link send} received in this process, for the never-the-token check. */
const answers: RawAnswer[] = []

/** Options of {@link send}. */
export interface SendOptions {
  method?: string
  /** Sent exactly as given (no normalisation): traversal tests depend on it. */
  path: string
  headers?: Record<string, string | string[]>
  /** A whole body, or chunks written one by one (chunked unless a content-length header is given). */
  body?: Buffer | string | ((req: http.ClientRequest) => Promise<void>)
}

/**
 * Sends one request with node:http, without any client-side path normalisation and on a fresh connection.
 * Resolves with the answer even when the server closed the connection while the body was still being sent.
 */
export function send(origin: string, options: SendOptions): Promise<RawAnswer> {
  const url = new URL(origin)
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: options.method ?? 'GET',
      path: options.path,
      headers: options.headers ?? {},
      agent: false,
    })
    let answered = false
    let gaveUp = false
    req.on('response', (res) => {
      answered = true
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const body = Buffer.concat(chunks)
        const answer = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          text: body.toString('utf8'),
        }
        answers.push(answer)
        resolve(answer)
      })
      res.on('error', reject)
    })
    req.on('error', (err) => {
      if (answered) return
      // The body's own failure (a client giving up): no answer is coming.
      if (gaveUp) return reject(err)
      // EPIPE/ECONNRESET while still writing an over-limit body: the answer may still be on its way, and on a
      // loaded machine it has come later than half a second.
      setTimeout(() => !answered && reject(err), WAIT_MS).unref()
    })
    const body = options.body
    if (typeof body === 'function') {
      body(req).then(
        () => req.end(),
        (err: unknown) => {
          gaveUp = true
          req.destroy(err as Error)
        },
      )
    } else {
      req.end(body)
    }
  })
}

/** Writes `chunk` to a request and waits for it to drain (ignores a request the server already closed). */
export function write(req: Writable, chunk: Buffer): Promise<void> {
  return new Promise((resolve) => {
    if (req.destroyed || req.write(chunk)) return resolve()
    const done = (): void => {
      req.off('drain', done)
      req.off('close', done)
      resolve()
    }
    req.on('drain', done)
    req.on('close', done)
  })
}

export { waitFor } from '../helpers/wait.ts'

/** The messaging token every proxied session is registered with in these tests. */
export const MESSAGING_TOKEN = 'msg-token-7f3a9c1e5b2d4f60a8e1'

/** A gateway with session `k1` (team `blue`) whose upstream is `echo` under `/base/k1/`. */
export interface ProxySetup {
  gw: TestGateway
  echo: Echo
  /** Authorization header values by role. */
  auth: { operator: string; viewer: string; foreign: string }
  /** Log lines the gateway wrote (JSON text). */
  logs: string[]
}

/** Starts an echo upstream and a gateway (env overrides allowed) with session k1 registered on it. */
export async function startProxy(t: TestContext, env: Record<string, string> = {}): Promise<ProxySetup> {
  const echo = await startEcho(t)
  const logs: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'))
      cb()
    },
  })
  const overrides = { LOG_LEVEL: 'info', ...env }
  // The app's own logger options (redaction, serializers), written to a sink the test reads.
  const options = loggerOptions(loadConfig(testEnv(overrides))) as Record<string, unknown>
  const gw = await startGateway(overrides, { logger: { ...options, stream: sink } as never })
  t.after(async () => {
    await gw.close()
    // Whatever the test did, the messaging token never reached a client or a log line.
    for (const answer of answers) {
      assert.ok(!answer.text.includes(MESSAGING_TOKEN), 'token in a response body')
      assert.ok(!JSON.stringify(answer.headers).includes(MESSAGING_TOKEN), 'token in a response header')
    }
    for (const line of logs) assert.ok(!line.includes(MESSAGING_TOKEN), `token in a log line: ${line}`)
  })
  await gw.app.sessions.put({
    kasmId: 'k1',
    upstream: `${echo.origin}/base/k1/`,
    team: 'blue',
    messagingToken: MESSAGING_TOKEN,
    source: 'admin',
  })
  const auth = {
    operator: `Bearer ${await bearer({ sub: 'olga', roles: ['operator'], teams: ['blue'] })}`,
    viewer: `Bearer ${await bearer({ sub: 'vera', roles: ['viewer'], teams: ['blue'] })}`,
    foreign: `Bearer ${await bearer({ sub: 'fred', roles: ['operator'], teams: ['red'] })}`,
  }
  return { gw, echo, auth, logs }
}
