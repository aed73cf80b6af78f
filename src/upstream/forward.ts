import type { IncomingHttpHeaders } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { Readable, Transform } from 'node:stream'
import type { FastifyReplyFromHooks } from '@fastify/reply-from'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { BadRequest } from '../errors.ts'
import type { Session } from '../sessions/types.ts'
import { GUARDED_HEADER, TARGET_HEADER } from './agent.ts'
import { type AnswerRequest, answerHeaders } from './answer-policy.ts'
import type { JsonBody } from './body.ts'
import { answerFailure, bodyFailure, type Failure, transportFailure } from './failures.ts'
import { upstreamRequestHeaders } from './headers.ts'
import { proxyRefuses, requestTarget, upstreamOrigin, upstreamUrl } from './paths.ts'
import { tokenEcho } from './token-echo.ts'

/** The upstream answer as @fastify/reply-from passes it from undici. */
interface UpstreamResponse {
  statusCode: number
  headers: IncomingHttpHeaders
  stream: Readable
}

/** What to forward: a validated path and query on a resolved session, and the body if any. */
export interface ForwardTarget {
  readonly session: Session
  /** The v1 route name, for metrics, logs and audit. */
  readonly route: string
  /** Relative upstream path rebuilt from validated segments (no leading slash). */
  readonly path: string
  /** Encoded query string without `?`, possibly empty. */
  readonly query: string
  /** The raw JSON body, or an upload stream (multipart through its byte counter). */
  readonly body?: JsonBody | Readable
  /** How the answer is shaped for the browser (answer-policy.ts). */
  readonly answer: AnswerRequest
}

/** Adds to the request's audit detail (the audit plugin's onResponse hook writes the record). */
export function noteAudit(request: FastifyRequest, detail: NonNullable<FastifyRequest['auditDetail']>): void {
  if (request.auditDetail) Object.assign(request.auditDetail, detail)
}

/**
 * Forwards the request to the session's runtime with @fastify/reply-from over the shared undici agent and
 * streams the answer back: status and body bytes as sent (an echoed token masked), headers as the answer
 * policy decides (answer-policy.ts). The messaging token is injected here and nowhere else. Runtime answers that blame the gateway's credential or
 * come from Kasm's proxy, and transport failures, become gateway errors (see failures.ts).
 */
export function forward(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  target: ForwardTarget,
): FastifyReply {
  const { session, route, body } = target
  const url = upstreamUrl(session.upstream, target.path, '')
  // The path guard of reply-from refuses names such as `..0a9` (paths.ts): it is given the origin, and the
  // router sends the exact target.
  const exact = proxyRefuses(url) ? requestTarget(url, target.query) : null
  const started = performance.now()
  const span = app.tracing.upstream(request, `${request.method} ${route}`, url)
  const observe = (status: string): void => {
    app.metrics.upstreamLatency.observe({ route, status }, (performance.now() - started) / 1000)
  }

  const fail = (failure: Failure, upstreamStatus?: number): void => {
    if (failure.reason !== undefined) {
      app.metrics.upstreamErrors.inc({ reason: failure.reason })
      const fields = { kasmId: session.kasmId, route, reason: failure.reason, upstreamStatus }
      if (failure.reason === 'token_refused')
        request.log.warn(fields, 'session runtime refused the messaging token; rotate it')
      else request.log.warn(fields, 'session runtime failed')
    }
    // An unread request body (an upload refused or cut short) must not be parsed as the next request.
    if (!request.raw.complete) reply.header('connection', 'close')
    reply.send(failure.error)
  }

  const hasBody = body !== undefined
  const options: FastifyReplyFromHooks = {
    // Never the client's query string: only what the route validated and re-encoded.
    queryString: () => target.query,
    // reply-from retries GETs on 503 by default; a runtime's 503 means something and must pass through.
    retryDelay: () => null,
    rewriteRequestHeaders: (_req, headers) => {
      const out = upstreamRequestHeaders(headers, {
        token: session.messagingToken.reveal(),
        hasBody,
        clientIp: request.ip,
        protocol: request.protocol,
        host: request.host,
        requestId: request.id,
        trace: span.headers,
      })
      // For agent.ts's router only (it removes it): this upstream's connections are checked by the URL policy.
      if (app.upstream.guarded(session)) out[GUARDED_HEADER] = '1'
      if (exact !== null) out[TARGET_HEADER] = exact
      return out
    },
    // Headers are copied in onResponse, once the status says whether the answer passes through at all.
    rewriteHeaders: () => ({}),
    onResponse: (_req, rep, raw) => {
      // The typings of reply-from describe a node:http response; with undici it hands over these three fields.
      const res = raw as unknown as UpstreamResponse
      const status = res.statusCode
      observe(String(status))
      span.end({ status })
      noteAudit(request, { upstreamStatus: status })
      const failure = answerFailure(status, res.headers)
      if (failure !== undefined) {
        res.stream.destroy()
        fail(failure, status)
        return
      }
      const echo = tokenEcho(session.messagingToken)
      const echoed = (where: 'header' | 'body') => (): void => {
        app.upstream.tokenEchoes.inc({ where })
        request.log.warn({ kasmId: session.kasmId, route, where }, 'session runtime echoed its token; masked')
      }
      const headers = answerHeaders(target.answer, status, res.headers, echo, echoed('header'))
      // Every body goes through the mask (same length, so Content-Length and ranges stay true). A small one
      // (the JSON API's answers, most run files) is read whole and sent as one buffer: no stream per answer,
      // and a runtime that breaks off mid-body gets the client a 502 instead of a truncated answer.
      if (isSmall(request.method, status, res.headers)) {
        readWhole(res.stream).then(
          (whole) => rep.headers(headers).send(echo.maskBody(whole, echoed('body'))),
          (err: unknown) => fail(bodyFailure(err), status),
        )
        return
      }
      rep.headers(headers).send(relay(res.stream, echo.masker(echoed('body'))))
    },
    onError: (_rep, { error }) => {
      // The client went away (an upload aborted mid-way): its own doing, not the runtime's. Nobody reads the
      // answer, but sending one completes the request's lifecycle (its audit record says what happened).
      if (request.raw.socket?.destroyed) {
        span.end({ error: 'client_aborted' })
        request.log.info({ kasmId: session.kasmId, route }, 'client went away during the upstream request')
        reply.send(new BadRequest('the client closed the request'))
        return
      }
      const failure = transportFailure(error)
      observe(failure.reason ?? 'error')
      span.end({ error: failure.reason ?? 'error' })
      fail(failure)
    },
  }
  if (body !== undefined && !isStream(body)) {
    options.body = body.raw
    options.contentType = body.contentType
  }
  return reply.from(exact === null ? url : upstreamOrigin(url), options)
}

/**
 * Pipes `source` through `mask` and returns `mask`, what `stream.pipeline()` would do for these two, without
 * its AbortController and the DOMException it builds at the end of every answer (4% of the proxy's CPU). A
 * runtime body that breaks destroys the mask with its error, so Fastify cuts the client's answer short; the
 * mask closing first (Fastify destroys it when the client leaves) stops the runtime's answer.
 */
function relay(source: Readable, mask: Transform): Transform {
  source.on('error', (err) => mask.destroy(err))
  mask.once('close', () => {
    if (!source.readableEnded) source.destroy()
  })
  return source.pipe(mask)
}

/** Bodies up to this many bytes (by their Content-Length) are read whole before they are sent. */
const SMALL_BODY = 64 * 1024

/** Whether an answer has a body of a known length of at most {@link SMALL_BODY}. */
function isSmall(method: string, status: number, headers: IncomingHttpHeaders): boolean {
  if (method === 'HEAD' || status === 204 || status === 304) return false
  const length = Number(headers['content-length'])
  return Number.isInteger(length) && length >= 0 && length <= SMALL_BODY
}

/** The whole of a (small) body; rejects with the stream's error when it breaks off. */
function readWhole(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    stream.once('error', reject)
    stream.once('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)))
  })
}

function isStream(body: JsonBody | Readable): body is Readable {
  return typeof (body as Readable).pipe === 'function'
}
