import { createHmac, timingSafeEqual } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'

/** One webhook request as the receiver got it. */
export interface Received {
  /** The request's path (one receiver may stand for several webhook URLs on one host). */
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly raw: string
  readonly body: Record<string, unknown>
  /** Whether `X-Krg-Signature` is the HMAC-SHA256 of the raw body under the receiver's secret. */
  readonly signed: boolean
  /** The status it was answered with (0: not answered, the receiver hung). */
  readonly answered: number
}

/** A real webhook receiver on 127.0.0.1 port 0, checking signatures as a receiver would (constant time). */
export interface Receiver {
  readonly url: string
  readonly received: Received[]
  /** Statuses to answer the next requests with, in order (then 204). */
  readonly script: number[]
  /** While true, requests are read but never answered. */
  hang: boolean
  /** The requests of one `X-Krg-Event` type. */
  of(type: string): Received[]
  close(): Promise<void>
}

/** Starts a receiver; `secret` is the HMAC key it checks signatures with. */
export async function startReceiver(secret = '', path = '/hook'): Promise<Receiver> {
  const received: Received[] = []
  const script: number[] = []
  const hung: http.ServerResponse[] = []
  const receiver: Receiver = {
    url: '',
    received,
    script,
    hang: false,
    of: (type) => received.filter((r) => r.headers['x-krg-event'] === type),
    close: async () => {
      for (const res of hung) res.destroy()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
  const server = http.createServer((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (d: string) => {
      raw += d
    })
    req.on('end', () => {
      const given = String(req.headers['x-krg-signature'] ?? '')
      const want = `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`
      const signed =
        secret !== '' &&
        given.length === want.length &&
        timingSafeEqual(Buffer.from(given), Buffer.from(want))
      const status = receiver.hang ? 0 : (script.shift() ?? 204)
      received.push({
        path: req.url ?? '',
        headers: req.headers,
        raw,
        body: JSON.parse(raw) as Record<string, unknown>,
        signed,
        answered: status,
      })
      if (status === 0) hung.push(res)
      else res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? '' : 'not now')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as AddressInfo
  ;(receiver as { url: string }).url = `http://127.0.0.1:${port}${path}`
  return receiver
}
