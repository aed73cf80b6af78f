import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Counter } from 'prom-client'

/** The parts of node's internal HTTP parser that a takeover touches (feature-detected, never assumed). */
interface HttpParserLike {
  _consumed?: boolean
  incoming?: unknown
  outgoing?: unknown
  socket?: unknown
  onIncoming?: unknown
  unconsume?: () => void
  remove?: () => void
  close?: () => void
}

/** A parser that passed the checks. */
type HttpParser = HttpParserLike & Required<Pick<HttpParserLike, 'unconsume' | 'remove' | 'close'>>

type HttpSocket = Socket & { parser?: HttpParserLike | null; _httpMessage?: unknown }

/** How a stream got its socket: taken from node:http, used as it is because a check failed, or as configured. */
export type TakeoverPath = 'fast' | 'fallback' | 'off'

/** Which check of node:http's internals failed, for the fallback's log line. */
export type TakeoverRefusal = 'no_parser' | 'parser_shape' | 'response_detached'

const SERVER_EVENTS = ['data', 'end', 'close', 'drain', 'error', 'timeout', 'pause', 'resume'] as const

/** The socket's parser when node:http's internals are as a takeover expects them, else the check that failed. */
function checkedParser(holder: HttpSocket, res: ServerResponse): HttpParser | TakeoverRefusal {
  const parser = holder.parser
  if (parser === undefined || parser === null) return 'no_parser'
  if (
    typeof parser.unconsume !== 'function' ||
    typeof parser.remove !== 'function' ||
    typeof parser.close !== 'function'
  )
    return 'parser_shape'
  if (holder._httpMessage !== res) return 'response_detached'
  return parser as HttpParser
}

/**
 * Takes hijacked requests' sockets away from node:http for good, the way node itself hands a socket to an
 * `upgrade` handler: the response is detached, the server's listeners and per-socket overrides are removed,
 * and its HTTP parser is released. What the request held (IncomingMessage, headers, the Fastify request and
 * reply, the parser) then becomes garbage instead of living as long as the stream, which is most of an idle
 * viewer's memory; the server's request and header timeouts no longer apply to the stream either.
 *
 * The parser's shape is checked before anything is done to it; on a node whose internals differ, the
 * socket is used as it is (everything works, at a higher memory cost). That fallback is counted in
 * `krg_socket_takeovers_total{path="fallback"}` and logged once (with the check that failed), so a Node or
 * Fastify upgrade that breaks the fast path is seen rather than paid for in memory unnoticed.
 */
export class SocketTakeover {
  readonly #enabled: boolean
  readonly #counter: Counter<'path'>
  readonly #log: FastifyBaseLogger
  #fallbackLogged = false

  /** `enabled` false (GATEWAY_SOCKET_TAKEOVER=off): every socket is used as it is, counted as `off`. */
  constructor(enabled: boolean, counter: Counter<'path'>, log: FastifyBaseLogger) {
    this.#enabled = enabled
    this.#counter = counter
    this.#log = log
  }

  /**
   * The request's socket, taken over from node:http when allowed and possible. Not to be called synchronously
   * inside a raw `request` listener (a Fastify handler runs after it returned): releasing the parser from
   * within its own callback crashes node.
   */
  take(req: IncomingMessage, res: ServerResponse): Socket {
    const socket = req.socket
    if (!this.#enabled) {
      this.#counter.inc({ path: 'off' })
      return socket
    }
    const holder = socket as HttpSocket
    const parser = checkedParser(holder, res)
    if (typeof parser === 'string') {
      this.#counter.inc({ path: 'fallback' })
      if (!this.#fallbackLogged) {
        this.#fallbackLogged = true
        this.#log.warn(
          { why: parser, node: process.version },
          'socket takeover fell back: node:http internals differ; streams keep their request state (more memory per viewer)',
        )
      }
      return socket
    }
    release(holder, res, parser)
    this.#counter.inc({ path: 'fast' })
    return socket
  }
}

function release(socket: HttpSocket, res: ServerResponse, parser: HttpParser): void {
  res.detachSocket(socket)
  for (const event of SERVER_EVENTS) socket.removeAllListeners(event)
  // node:http's per-socket `on`/`addListener` overrides put the prototype's back on their first call once the
  // parser is gone. They are not deleted here: deleting properties turns the socket into a slow dictionary
  // object that costs more memory than the whole rest of an idle viewer.
  if (parser._consumed) parser.unconsume()
  parser._consumed = false
  parser.incoming = null
  parser.outgoing = null
  parser.socket = null
  parser.onIncoming = null
  parser.remove()
  socket.parser = null
  // As node does for a parser it does not pool: close it once its stack has unwound.
  setImmediate(() => parser.close())
  // Read again (nothing is expected; what arrives is discarded) so a client's FIN or reset is noticed.
  socket.resume()
}
