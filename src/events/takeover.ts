import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

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

const SERVER_EVENTS = ['data', 'end', 'close', 'drain', 'error', 'timeout', 'pause', 'resume'] as const

/**
 * Takes a hijacked request's socket away from node:http for good, the way node itself hands a socket to an
 * `upgrade` handler: the response is detached, the server's listeners and per-socket overrides are removed,
 * and its HTTP parser is released. What the request held (IncomingMessage, headers, the Fastify request and
 * reply, the parser) then becomes garbage instead of living as long as the stream, which is most of an idle
 * viewer's memory; the server's request and header timeouts no longer apply to the stream either.
 *
 * The parser's shape is checked before anything is done to it; on a node whose internals differ, the
 * socket is used as it is (everything works, at a higher memory cost).
 */
export function takeOver(req: IncomingMessage, res: ServerResponse): Socket {
  const socket = req.socket
  const holder = socket as Socket & { parser?: HttpParserLike | null; _httpMessage?: unknown }
  const parser = holder.parser
  if (
    parser === undefined ||
    parser === null ||
    typeof parser.unconsume !== 'function' ||
    typeof parser.remove !== 'function' ||
    typeof parser.close !== 'function' ||
    holder._httpMessage !== res
  ) {
    return socket
  }
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
  holder.parser = null
  // As node does for a parser it does not pool: close it once its stack has unwound.
  setImmediate(() => parser.close?.())
  // Read again (nothing is expected; what arrives is discarded) so a client's FIN or reset is noticed.
  socket.resume()
  return socket
}
