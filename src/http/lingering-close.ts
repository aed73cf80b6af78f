import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import fp from 'fastify-plugin'
import { uploadLimit } from '../upstream/body.ts'

/** The longest a refused body is read past (nginx's lingering_timeout is 5 s, its lingering_time 30 s). */
const LINGER_MS = 5000

const ARMED = Symbol('lingering-armed')
type LingeringSocket = Socket & { [ARMED]?: true }

function hasBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length']
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/**
 * Reads from the socket again. node:http's backpressure on an unread body stops the socket's handle while its
 * stream still counts a read in flight, so `resume()` alone starts nothing: net.Socket's own `_read` restarts
 * the handle (it does nothing when the handle already reads).
 */
function restartReading(socket: Socket): void {
  const read = (socket as Socket & { _read?: (size: number) => void })._read
  if (typeof read === 'function') read.call(socket, 64 * 1024)
}

/**
 * A lingering close, as nginx does it: an answer sent while the client is still sending its body (a 413
 * before the upload is read, a 401 before any body is) closes the connection, but closing at once would make
 * the kernel reset it as the client's next bytes arrive, and a reset can destroy the answer before the client
 * reads it. So the gateway sends the answer and its FIN, then lets node:http read and discard the rest of the
 * body (at most twice an upload's limit, for at most {@link LINGER_MS}) until the client closes; then the
 * socket goes. node:http serves nothing the client pipelines behind that body (Connection: close).
 */
export const lingeringClosePlugin = fp(
  async (app) => {
    const maxBytes = 2 * uploadLimit(app.config.env.GATEWAY_MAX_ATTACHMENT_BYTES)
    const lingering = new Set<Socket>()

    const linger = (socket: Socket, body: IncomingMessage): void => {
      lingering.add(socket)
      const timer = setTimeout(() => socket.destroy(), LINGER_MS)
      timer.unref()
      socket.once('close', () => {
        clearTimeout(timer)
        lingering.delete(socket)
      })
      let read = 0
      // node:http is dumping the body (it read none of it): count what goes by.
      body.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > maxBytes) socket.destroy()
      })
      socket.end()
      restartReading(socket)
    }

    // Callback-style: every answer passes here, and an async hook would cost each a promise.
    app.addHook('onSend', (request, reply, payload, done) => {
      const raw = request.raw
      if (raw.complete || !hasBody(raw)) return done(null, payload)
      const socket = raw.socket as LingeringSocket
      if (socket[ARMED]) return done(null, payload)
      socket[ARMED] = true
      reply.header('connection', 'close')
      // node:http calls destroySoon() once this answer is written (Connection: close): linger instead.
      socket.destroySoon = () => linger(socket, raw)
      done(null, payload)
    })
    // A lingering client must not hold the shutdown (the server waits for its sockets before onClose).
    app.addHook('preClose', async () => {
      for (const socket of lingering) socket.destroy()
    })
  },
  { name: 'lingering-close' },
)
