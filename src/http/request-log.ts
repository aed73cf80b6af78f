import { type FastifyReply, type FastifyRequest, LogController } from 'fastify'

/**
 * Fastify's request lines ("incoming request", "request completed") at `debug` instead of `info`: what the
 * demo's terminal runs with, so the sign-in instructions it prints are not scrolled away by a page's
 * requests. Errors stay at `error`. Production keeps Fastify's own controller (the lines at `info`).
 */
export class DebugRequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return
    if (error) reply.log.error({ res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    else reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}
