import { randomBytes } from 'node:crypto'
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
 * This process's share of every id it makes: 42 random bits (RFC 9562's `rand_a`, and `rand_b` after the
 * variant bits but for its last 32), so ids of two replicas differ even in the same millisecond.
 */
const NODE_BITS = randomBytes(6)
const RAND_A = (NODE_BITS.readUInt16BE(0) & 0xfff).toString(16).padStart(3, '0')
const RAND_B_BITS = NODE_BITS.readUInt32BE(2) >>> 2 // 30 bits
/** The variant (`10`) and 2 random bits as one hex digit, then 28 more random bits. */
const RAND_B = `${(0x8 | (RAND_B_BITS >>> 28)).toString(16)}${(RAND_B_BITS & 0xfffffff).toString(16).padStart(7, '0')}`
let counter = randomBytes(4).readUInt32BE(0)
let lastMs = -1
let lastPrefix = ''

/**
 * A new request id: a UUIDv7 (RFC 9562), 48 bits of milliseconds, then this process's random bits, then a
 * 32-bit counter (RFC 9562's fixed-length counter method): unique across replicas and restarts, in time order
 * in the shared audit stream, and a string built without a random draw per request.
 */
export function newRequestId(now: number = Date.now()): string {
  if (now !== lastMs) {
    const ms = now.toString(16).padStart(12, '0')
    lastPrefix = `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${RAND_A}-${RAND_B.slice(0, 4)}-${RAND_B.slice(4)}`
    lastMs = now
  }
  counter = (counter + 1) >>> 0
  return lastPrefix + counter.toString(16).padStart(8, '0')
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
