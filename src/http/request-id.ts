import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import proxyAddr from '@fastify/proxy-addr'

/** The header that carries a request's id: read from a trusted proxy, returned to the client, sent upstream. */
export const REQUEST_ID_HEADER = 'x-request-id'

/**
 * An incoming id the gateway adopts: 1 to 128 characters of letters, digits and `._:+/=-` (UUIDs, hex,
 * base64 and ingress-nginx's or Envoy's ids pass; spaces, quotes, control characters and commas, which is
 * how node joins a repeated header, do not). Anything else is ignored and a fresh id is made.
 */
export const INCOMING_REQUEST_ID = /^[\w.:+/=-]{1,128}$/

/** GATEWAY_TRUST_PROXY as Fastify's `trustProxy` takes it (config.ts has already validated it). */
export function parseTrustProxy(value: string): boolean | string[] {
  if (value === 'true') return true
  if (value === 'false' || value === '') return false
  return value.split(',').map((s) => s.trim())
}

/**
 * Whether the peer that sent a request is a proxy GATEWAY_TRUST_PROXY trusts: anyone for `true`, nobody for
 * `false`, else an address in the list. Only then does the gateway believe what the request says about
 * itself (X-Forwarded-For, X-Request-ID, a parent trace).
 */
export function peerTrust(value: string): (req: IncomingMessage) => boolean {
  const trust = parseTrustProxy(value)
  if (trust === true) return () => true
  if (trust === false) return () => false
  const trusted = proxyAddr.compile(trust)
  return (req) => {
    const peer = req.socket?.remoteAddress
    return peer !== undefined && trusted(peer, 0)
  }
}

/**
 * A new request id: a UUIDv7 (RFC 9562), 48 bits of milliseconds then 74 random bits, so ids are unique
 * across replicas and restarts, and sort by time in the shared audit stream. The random part is a v4 UUID's
 * (node buffers its entropy for those: several times cheaper than a `randomBytes` call per id).
 */
export function newRequestId(now: number = Date.now()): string {
  const random = randomUUID() // xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx: keep from after the version digit
  const ms = now.toString(16).padStart(12, '0')
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${random.slice(15)}`
}

/**
 * Fastify's `genReqId`: the `X-Request-ID` a trusted proxy set (an ingress's, so its log and ours match),
 * when it is well-formed; else a new id. A client that reaches the gateway directly cannot choose its id.
 */
export function requestIdGenerator(trustProxy: string): (req: IncomingMessage) => string {
  const trusted = peerTrust(trustProxy)
  return (req) => {
    const incoming = req.headers[REQUEST_ID_HEADER]
    if (typeof incoming === 'string' && INCOMING_REQUEST_ID.test(incoming) && trusted(req)) return incoming
    return newRequestId()
  }
}
