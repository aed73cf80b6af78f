import diagnostics from 'node:diagnostics_channel'
import type { Socket } from 'node:net'
import fp from 'fastify-plugin'

/** How often the shutdown looks whether the server has stopped accepting, once its own hook has run. */
const SWEEP_RETRY_MS = 5

/** node:http publishes here as each response finishes; subscribed only while the server drains. */
const RESPONSE_FINISH = 'http.server.response.finish'

/**
 * Keeps connections from holding the shutdown's drain once the server stops accepting.
 *
 * - Connections that never sent a whole request (connection-limit.ts keeps them) are closed. Browsers open such sockets ahead of need
 *   (Chromium's preconnect), and node:http counts a connection as busy from its first moment, so neither
 *   `server.close()` nor `closeIdleConnections()` closes it: the drain waited for the headers timeout (up to
 *   a minute), past a short grace period, and then the exit skipped what `onClose` does last (the audit
 *   flush). Such a socket carries nothing: closing it loses no request, and a client opens another.
 * - A request in flight finishes, then its connection is closed. node:http had already promised it
 *   keep-alive, and an idle connection is closed only at the moment `server.close()` is called: left alone,
 *   it held the drain for the keep-alive timeout. The channel costs nothing until the shutdown subscribes.
 */
export const drainConnectionsPlugin = fp(
  async (app) => {
    const endAfterResponse = (message: unknown): void => {
      const { server, socket } = message as { server: unknown; socket: Socket }
      if (server === app.server) socket.end()
    }
    // 'close' comes once every connection is gone, possibly before a sweep's next look: then nothing is left
    // to drain, and a subscription made after it would never be ended.
    let closed = false
    app.server.once('close', () => {
      closed = true
      diagnostics.unsubscribe(RESPONSE_FINISH, endAfterResponse)
    })
    const sweep = (): void => {
      if (closed) return
      // Fastify calls `server.close()` right after the last preClose hook: until then a connection may still
      // arrive, and this hook need not be the last one.
      if (app.server.listening) {
        setTimeout(sweep, SWEEP_RETRY_MS)
        return
      }
      app.connections.closeWaiting()
      diagnostics.subscribe(RESPONSE_FINISH, endAfterResponse)
    }
    app.addHook('preClose', (done) => {
      sweep()
      done()
    })
  },
  { name: 'drain-connections', dependencies: ['connection-limit'] },
)
