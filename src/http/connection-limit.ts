import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import fp from 'fastify-plugin'
import { Counter, Gauge } from 'prom-client'
import { TooManyConnections } from '../errors.ts'
import { PROBE_PATHS } from '../routes/health.ts'
import { connectionLimits, readDescriptorLimit } from './connection-limits.ts'
import { RETRY_AFTER_S } from './load-shedding.ts'
import { LogThrottle } from './log-throttle.ts'

/** At most one log line per this long says how many connections were refused or closed meanwhile. */
const LOG_EVERY_MS = 10_000

/** The `reason` label values of `krg_connections_refused_total`. */
const REFUSAL_REASONS = ['limit', 'half_open', 'dropped', 'accept_failed'] as const
type RefusalReason = (typeof REFUSAL_REASONS)[number]

/** The server's connections that are waiting for a request (none sent yet, or kept alive between two). */
export interface WaitingConnections {
  /** Closes them all (the shutdown: they carry nothing, and a client opens another). */
  closeWaiting(): void
}

declare module 'fastify' {
  interface FastifyInstance {
    connections: WaitingConnections
  }
}

/**
 * node:http's count of the server's open connections, event streams taken over from it included (net.Server
 * counts a connection until its socket is destroyed; its own `maxConnections` check reads the same number).
 * Listeners cannot keep this count: a takeover removes every `close` listener of a stream's socket.
 */
function openConnections(server: Server): number {
  return (server as Server & { _connections: number })._connections
}

/** Whether node:http has a response of another request on the socket (a pipelined one) after this one. */
function busy(socket: Socket): boolean {
  return (socket as Socket & { _httpMessage?: unknown })._httpMessage != null
}

/**
 * Keeps a replica's connections under its descriptor limit, so that a crowd of viewers or of connections that
 * never finish their headers cannot make `accept()` (or anything else that opens a file) fail with EMFILE.
 *
 * - The cap (GATEWAY_MAX_CONNECTIONS, else the descriptor limit read at boot less a reserve; see
 *   connection-limits.ts): a connection accepted past it is answered 503 `too_many_connections` with
 *   Retry-After and `Connection: close` on its first request, probes excepted, so viewers go to another
 *   replica and the orchestrator still sees this one live. Past the cap and a small room node drops new
 *   connections unanswered (`maxConnections`).
 * - Connections that have not sent a whole request (new ones, and kept-alive ones between requests) hold a
 *   descriptor for nothing: they count against a tighter share (GATEWAY_MAX_HALF_OPEN_CONNECTIONS, else a
 *   quarter of the cap), and are closed first: past the share, or when a connection arrives at the cap, the
 *   one waiting longest is closed (a slow-headers attack only ever holds the share, and evicts itself).
 * - An `accept()` the OS refuses is counted and logged, never thrown.
 *
 * Everything is counted in `krg_connections_refused_total{reason}` and logged at most once per
 * {@link LOG_EVERY_MS}; `krg_connections_open` against `krg_connections_limit` says how close the replica is.
 */
export const connectionLimitPlugin = fp(
  async (app) => {
    const server = app.server
    const limits = connectionLimits(app.config.env, readDescriptorLimit())
    app.log.debug(limits, 'connection limits')
    server.maxConnections = limits.hard
    const registers = [app.metrics.registry]
    const refused = new Counter({
      name: 'krg_connections_refused_total',
      help: 'Connections refused or closed to stay under the cap, by reason: limit (accepted over krg_connections_limit, answered 503 too_many_connections), half_open (had not sent a whole request; closed to make room), dropped (past the cap and its room: closed unanswered), accept_failed (the OS gave no descriptor)',
      labelNames: ['reason'],
      registers,
    })
    for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0)
    new Gauge({
      name: 'krg_connections_limit',
      help: 'The connections this replica serves (GATEWAY_MAX_CONNECTIONS, else derived from its descriptor limit); past it they are refused',
      registers,
    }).set(limits.cap)
    new Gauge({
      name: 'krg_connections_open',
      help: 'Client connections open now (event streams included), against krg_connections_limit',
      registers,
      collect() {
        this.set(openConnections(server))
      },
    })
    const waiting = new Set<Socket>()
    new Gauge({
      name: 'krg_connections_half_open',
      help: 'Connections that have not sent a whole request (new, or kept alive between requests), at most GATEWAY_MAX_HALF_OPEN_CONNECTIONS',
      registers,
      collect() {
        this.set(waiting.size)
      },
    })

    const throttle = new LogThrottle(LOG_EVERY_MS)
    const note = (reason: RefusalReason, err?: NodeJS.ErrnoException): void => {
      refused.inc({ reason })
      const count = throttle.count()
      if (count === null) return
      app.log.warn(
        { reason, count, open: openConnections(server), cap: limits.cap, ...(err ? { err } : {}) },
        'connections refused or closed to stay under the connection limits',
      )
    }

    /** Connections accepted past the cap: their requests are refused (a weak set: nothing to clean up). */
    const overCap = new WeakSet<Socket>()
    // Shared by every socket (no closure per connection). A stream's takeover removes it, after its request
    // took the socket out of `waiting` for good.
    function forget(this: Socket): void {
      waiting.delete(this)
    }
    /** Closes the connection waiting longest, unless that is `keep` (the one just accepted). */
    const closeOldest = (keep: Socket): void => {
      const oldest = waiting.values().next().value
      if (oldest === undefined || oldest === keep) return
      waiting.delete(oldest)
      oldest.destroy()
      note('half_open')
    }
    const wait = (socket: Socket): void => {
      waiting.add(socket)
      if (waiting.size > limits.halfOpen) closeOldest(socket)
    }

    server.on('connection', (socket: Socket) => {
      socket.on('close', forget)
      // node:http counted it already: past the cap, a connection that carries nothing makes room first.
      if (openConnections(server) > limits.cap) closeOldest(socket)
      if (openConnections(server) > limits.cap) overCap.add(socket)
      wait(socket)
    })
    // Node's own: past `maxConnections` the connection is closed before anyone sees it.
    server.on('drop', () => note('dropped'))
    // Ahead of Fastify's listener, whose handler may answer before a later listener would run.
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      waiting.delete(req.socket)
      res.on('finish', backToWaiting)
    })
    // node:http's own `finish` listener ran first: the socket is closing, or kept alive for the next request.
    function backToWaiting(this: ServerResponse): void {
      const socket = this.req.socket
      if (!socket.destroyed && !busy(socket)) wait(socket)
    }
    // After the listen, whose own failures (EADDRINUSE) the boot reports: from then on the server's errors are
    // `accept()` failing (EMFILE, ENFILE), which node emits on it and which would end the process unheard.
    app.addHook('onListen', (done) => {
      server.on('error', (err: NodeJS.ErrnoException) => note('accept_failed', err))
      done()
    })

    // Callback-style, as every hook each request passes: one WeakSet lookup.
    app.addHook('onRequest', (request, reply, done) => {
      if (!overCap.has(request.raw.socket) || PROBE_PATHS.has(request.routeOptions.url ?? '')) return done()
      note('limit')
      reply.header('retry-after', String(RETRY_AFTER_S))
      reply.header('connection', 'close')
      done(new TooManyConnections())
    })

    app.decorate('connections', {
      closeWaiting() {
        for (const socket of waiting) socket.destroy()
        waiting.clear()
      },
    })
  },
  { name: 'connection-limit', dependencies: ['metrics'] },
)
