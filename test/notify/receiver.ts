import { createHmac, timingSafeEqual } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'

/** How far a signed timestamp may be from the receiver's clock (docs/notifications.md's check). */
export const TOLERANCE_S = 5 * 60

/**
 * What docs/notifications.md tells a receiver to check, in that order: the signature over `<timestamp>.<raw body>` (in
 * constant time), the timestamp within {@link TOLERANCE_S} of its clock, then the delivery id not seen before.
 */
export type Verdict = 'ok' | 'unsigned' | 'bad_signature' | 'stale' | 'duplicate'

/** The signature and timestamp part of the check (no memory of deliveries): a pure function of one request. */
export function verify(
  secret: string,
  headers: http.IncomingHttpHeaders,
  raw: Buffer,
  nowS = Date.now() / 1000,
): Exclude<Verdict, 'duplicate'> {
  const given = headers['x-krg-signature']
  const timestamp = headers['x-krg-timestamp']
  if (secret === '' || typeof given !== 'string' || typeof timestamp !== 'string') return 'unsigned'
  const want = `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(raw).digest('hex')}`
  if (given.length !== want.length || !timingSafeEqual(Buffer.from(given), Buffer.from(want)))
    return 'bad_signature'
  const at = Number(timestamp)
  if (!/^\d+$/.test(timestamp) || Math.abs(nowS - at) > TOLERANCE_S) return 'stale'
  return 'ok'
}

/** One webhook request as the receiver got it. */
export interface Received {
  /** The request's path (one receiver may stand for several webhook URLs on one host). */
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly raw: string
  readonly body: Record<string, unknown>
  /** Signed over its timestamp and raw body under the receiver's secret, the timestamp fresh (any delivery). */
  readonly signed: boolean
  /** What the whole check said, delivery ids remembered included. */
  readonly verdict: Verdict
  /** The status it was answered with (0: not answered, the receiver hung). */
  readonly answered: number
}

/** A real webhook receiver on 127.0.0.1 port 0 making the check docs/notifications.md describes. */
export interface Receiver {
  readonly url: string
  readonly received: Received[]
  /** Statuses to answer the next requests with, in order (then 204). */
  readonly script: number[]
  /** While true, requests are read but never answered. */
  hang: boolean
  /** Seconds added to the receiver's clock (a replay some minutes later). */
  clockSkewS: number
  /** The requests of one `X-Krg-Event` type. */
  of(type: string): Received[]
  close(): Promise<void>
}

/** Starts a receiver; `secret` is the HMAC key it checks signatures with. */
export async function startReceiver(secret = '', path = '/hook'): Promise<Receiver> {
  const received: Received[] = []
  const script: number[] = []
  const hung: http.ServerResponse[] = []
  /** Delivery ids handled (a real receiver keeps them for 15 minutes). */
  const seen = new Set<string>()
  const receiver: Receiver = {
    url: '',
    received,
    script,
    hang: false,
    clockSkewS: 0,
    of: (type) => received.filter((r) => r.headers['x-krg-event'] === type),
    close: async () => {
      for (const res of hung) res.destroy()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
  const server = http.createServer((req, res) => {
    // Tests run side by side: a port freed by one may be probed by another's leftover client. The gateway's
    // deliveries are POSTs of JSON.
    if (req.method !== 'POST') {
      res.writeHead(404).end()
      return
    }
    const chunks: Buffer[] = []
    req.on('data', (d: Buffer) => chunks.push(d))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const checked = verify(secret, req.headers, raw, Date.now() / 1000 + receiver.clockSkewS)
      let body: Record<string, unknown>
      try {
        body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>
      } catch {
        res.writeHead(400).end()
        return
      }
      // The json body's `delivery` is signed; the header is the same id for every format.
      const delivery = String(body.delivery ?? req.headers['x-krg-delivery'] ?? '')
      const status = receiver.hang ? 0 : (script.shift() ?? 204)
      const verdict: Verdict = checked === 'ok' && seen.has(delivery) ? 'duplicate' : checked
      if (checked === 'ok' && status >= 200 && status < 300) seen.add(delivery)
      received.push({
        path: req.url ?? '',
        headers: req.headers,
        raw: raw.toString('utf8'),
        body,
        signed: checked === 'ok',
        verdict,
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
