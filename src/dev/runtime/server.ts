import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import multipart from '@fastify/multipart'
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify'
import type { RuntimeCore } from './core.ts'
import type { RouteAccess } from './credentials.ts'
import { HttpError } from './http-error.ts'
import { controlRoutes } from './routes/control.ts'
import { eventRoutes } from './routes/events.ts'
import { fileRoutes } from './routes/files.ts'
import { messageRoutes } from './routes/messages.ts'
import { requestRoutes } from './routes/requests.ts'

/** One request as the runtime received it, for asserting what a client (the gateway) sent. */
export interface ReceivedRequest {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
  /** Body bytes read so far; final once the request ended. */
  bodyBytes: number
}

/** Keeps `received` bounded in a long-running demo; far above what any test sends. */
const RECEIVED_LIMIT = 10_000

/**
 * The network-facing switches that sit in front of the routes: a whole-server status (the Kasm proxy
 * answering before the runtime is up), a hang, and the log of received requests.
 */
export class ServerControls {
  down: number | null = null
  hang = false
  readonly received: ReceivedRequest[] = []
  private readonly held = new Set<ServerResponse>()

  /** Handles a request before the app sees it; false when the controls answered (or swallowed) it. */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    const record: ReceivedRequest = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: { ...req.headers },
      bodyBytes: 0,
    }
    this.received.push(record)
    if (this.received.length > RECEIVED_LIMIT) this.received.shift()
    countBody(req, record)
    if (this.hang) {
      this.held.add(res)
      res.on('close', () => this.held.delete(res))
      req.resume()
      return false
    }
    if (this.down !== null) {
      const status = this.down
      req.resume()
      res.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
      })
      res.end(
        JSON.stringify({ error: 'runtime_unavailable', message: `the runtime answers ${status} for now` }),
      )
      return false
    }
    return true
  }

  /** Destroys every held (hung) request. */
  releaseHeld(): void {
    for (const res of this.held) res.destroy()
    this.held.clear()
  }
}

/**
 * Counts body bytes as the HTTP parser hands them over, whoever consumes the body (JSON parser, multipart,
 * nobody), by wrapping this one request's `push`. Listening to `data` instead would switch the stream to
 * flowing mode before its consumer attached, and lose chunks.
 */
function countBody(req: IncomingMessage, record: ReceivedRequest): void {
  const push = req.push.bind(req)
  req.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
    if (typeof chunk === 'string') record.bodyBytes += Buffer.byteLength(chunk, encoding)
    else if (chunk instanceof Uint8Array) record.bodyBytes += chunk.byteLength
    return push(chunk, encoding)
  }
}

/** Builds the runtime's Fastify app: every route at the root, the access rules in one hook. */
export async function buildRuntimeApp(core: RuntimeCore, controls: ServerControls): Promise<FastifyInstance> {
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    exposeHeadRoutes: false,
    bodyLimit: 1024 * 1024,
    routerOptions: { maxParamLength: 1000 },
    // A path the router cannot decode names no file and no route: 404 with the sandbox headers (an artifact
    // URL must never be answered without them), rather than the router's 400.
    frameworkErrors: (error, _request, genericReply) => {
      const reply = genericReply as FastifyReply
      const status = error.code === 'FST_ERR_BAD_URL' ? 404 : (error.statusCode ?? 400)
      void reply
        .code(status)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', 'sandbox')
        .send({ error: status === 404 ? 'not_found' : 'bad_request', message: error.message })
    },
    serverFactory: (handler) =>
      createServer((req, res) => {
        if (controls.admit(req, res)) handler(req, res)
      }),
  })

  // An empty JSON body (a bare POST .../cancel) is no body, not a parse error.
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (text.trim() === '') return done(null, undefined)
    try {
      done(null, JSON.parse(text))
    } catch {
      done(new HttpError(400, 'invalid_json', 'the body is not valid JSON'), undefined)
    }
  })
  await app.register(multipart, { limits: { fileSize: core.options.attachmentBytes } })

  app.addHook('onRequest', async (request) => {
    const rule = request.routeOptions.config as Partial<RouteAccess>
    if (rule.access !== undefined)
      core.credentials.check(request, { access: rule.access, inbox: rule.inbox === true })
  })
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
    if (!reply.hasHeader('x-content-type-options')) reply.header('x-content-type-options', 'nosniff')
    return payload
  })
  app.setErrorHandler((error: FastifyError | HttpError, _request, reply) => {
    if (error instanceof HttpError) return reply.code(error.statusCode).send(error.body())
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 ? error.statusCode : 500
    return reply.code(status).send({ error: error.code ?? 'internal', message: error.message })
  })
  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send({ error: 'not_found', message: 'no such route' }),
  )

  eventRoutes(app, core)
  messageRoutes(app, core)
  requestRoutes(app, core)
  controlRoutes(app, core)
  fileRoutes(app, core)
  return app
}
