import type { Socket } from 'node:net'
import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { toErrorBody } from '../errors.ts'
import { peerTrust } from '../http/request-id.ts'
import { PROBE_PATHS } from '../routes/health.ts'
import { spansEnabled, traceHeaders, tracer } from './spans.ts'

/** The upstream call of a request: the headers that carry its trace, and how it ended. */
export interface UpstreamSpan {
  /** `traceparent` (and `tracestate`) for the runtime; empty when there is no trace to continue. */
  readonly headers: Readonly<Record<string, string>>
  /** Ends the span with the runtime's status, or with the failure that stopped the call. */
  end(outcome: { status: number } | { error: string }): void
}

/** What the routes use of tracing; every method is cheap and safe with tracing off. */
export interface Tracing {
  /** Starts the span of `request`'s call to a runtime (absolute `href`), a child of the request's span. */
  upstream(request: FastifyRequest, name: string, href: string): UpstreamSpan
  /**
   * For a hijacked response (an event stream), which no onResponse reaches: ends the request's span when
   * `socket` closes. Keeps only the span, so the request stays collectable.
   */
  endWhenClosed(request: FastifyRequest, socket: Socket, status: number): void
}

declare module 'fastify' {
  interface FastifyInstance {
    tracing: Tracing
  }
  interface FastifyRequest {
    /** The request's server span and the context naming it; null with tracing off. */
    traceSpan: { span: Span; context: Context } | null
  }
}

/** `traceparent` version 00 as W3C Trace Context defines it (all-zero ids are invalid). */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/
/** `tracestate`: bounded, printable, no spaces but after commas. */
const TRACESTATE = /^[\x21-\x7e]+(?:, ?[\x21-\x7e]+)*$/

const NO_SPAN: UpstreamSpan = { headers: {}, end: () => {} }

/**
 * Request tracing (see sdk.ts for the SDK). With tracing on: a server span per request, named by method and
 * route, whose parent is the `traceparent` of a trusted proxy (GATEWAY_TRUST_PROXY; a direct client cannot
 * graft its requests onto another trace), active for everything the request does; its status, error code
 * and request id are attributes. The upstream call is a child span whose `traceparent` the runtime gets.
 * With tracing off no hook is added, and a trusted proxy's `traceparent`/`tracestate` pass to the runtime
 * unchanged, so a trace that crosses the gateway still reaches the runtime.
 */
export const tracingPlugin = fp(
  async (app: FastifyInstance) => {
    const trusted = peerTrust(app.config.env.GATEWAY_TRUST_PROXY)
    const enabled = spansEnabled()
    app.decorateRequest('traceSpan', null)
    app.decorate('tracing', enabled ? liveTracing() : passThrough(trusted))
    if (!enabled) return

    app.addHook('onRequest', (request, _reply, done) => {
      // A kubelet's probes and Prometheus's scrapes every few seconds would drown the traces that matter.
      if (PROBE_PATHS.has(request.routeOptions.url ?? '')) return done()
      const parent = trusted(request.raw) ? propagation.extract(ROOT_CONTEXT, request.headers) : ROOT_CONTEXT
      const route = request.routeOptions.url
      const span = tracer().startSpan(
        route === undefined ? request.method : `${request.method} ${route}`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': request.method,
            'url.path': request.url.split('?')[0],
            'url.scheme': request.protocol,
            ...(route === undefined ? {} : { 'http.route': route }),
            'client.address': request.ip,
            'krg.request_id': request.id,
          },
        },
        parent,
      )
      const active = trace.setSpan(parent, span)
      request.traceSpan = { span, context: active }
      // Everything the request starts from here (its handlers, their promises) runs with its span active.
      context.with(active, done)
    })
    app.addHook('onError', async (request, _reply, error) => {
      request.traceSpan?.span.setAttribute('error.type', toErrorBody(error).body.error)
    })
    app.addHook('onResponse', async (request, reply) => {
      if (request.traceSpan) endServerSpan(request.traceSpan.span, reply.statusCode)
    })
    app.addHook('onRequestAbort', async (request) => {
      const span = request.traceSpan?.span
      if (!span) return
      span.setAttribute('error.type', 'client_aborted')
      span.setStatus({ code: SpanStatusCode.ERROR })
      span.end()
    })
  },
  { name: 'tracing' },
)

function endServerSpan(span: Span, status: number): void {
  span.setAttribute('http.response.status_code', status)
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end()
}

function liveTracing(): Tracing {
  return {
    upstream(request, name, href) {
      // Parsed only here: with tracing off no request pays for it.
      const url = new URL(href)
      const parent = request.traceSpan?.context ?? context.active()
      const span = tracer().startSpan(
        name,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'http.request.method': request.method,
            'server.address': url.hostname,
            'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
            'url.path': url.pathname,
          },
        },
        parent,
      )
      return {
        headers: traceHeaders(span, parent),
        end(outcome) {
          if ('status' in outcome) {
            span.setAttribute('http.response.status_code', outcome.status)
            if (outcome.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
          } else {
            span.setAttribute('error.type', outcome.error)
            span.setStatus({ code: SpanStatusCode.ERROR })
          }
          span.end()
        },
      }
    },
    endWhenClosed(request, socket, status) {
      const span = request.traceSpan?.span
      if (span) socket.once('close', () => endServerSpan(span, status))
    },
  }
}

function passThrough(trusted: (req: FastifyRequest['raw']) => boolean): Tracing {
  return {
    upstream(request) {
      if (!trusted(request.raw)) return NO_SPAN
      const { traceparent, tracestate } = request.headers
      if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent)) return NO_SPAN
      const headers: Record<string, string> = { traceparent }
      if (typeof tracestate === 'string' && tracestate.length <= 512 && TRACESTATE.test(tracestate))
        headers.tracestate = tracestate
      return { headers, end: () => {} }
    },
    endWhenClosed: () => {},
  }
}
