import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

/**
 * A hijacked response (an event stream) never reaches Fastify's `onResponse` or its "request completed" line.
 * This counts it in `krg_http_requests_total` and `krg_http_stream_duration_seconds`, and writes that access
 * log line (with `responseTime` in ms, as Fastify's), when its socket closes, however it ends; its trace span
 * ends then too.
 *
 * Only strings and numbers are kept until then: the request and reply must stay collectable for the life of
 * the stream (see events/takeover.ts).
 */
export function countWhenClosed(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  socket: Socket,
  statusCode = 200,
): void {
  const reqId = request.id
  const route = request.routeOptions.url ?? 'unmatched'
  const method = request.method
  const before = reply.elapsedTime
  const openedAt = performance.now()
  app.tracing.endWhenClosed(request, socket, statusCode)
  socket.once('close', () => {
    const responseTime = before + (performance.now() - openedAt)
    app.metrics.endedStreams.inc({ route, method, status: String(statusCode) })
    app.metrics.streamDuration.observe({ route }, responseTime / 1000)
    app.log[app.requestLogLevel](
      { reqId, res: { statusCode }, responseTime, stream: true },
      'request completed',
    )
  })
}
