import {
  type Attributes,
  type Context,
  context,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import { type Dispatcher, request } from 'undici'
import { serviceName, version } from '../version.ts'

/**
 * Spans the gateway makes by hand, through @opentelemetry/api only (the SDK is loaded by sdk.ts when
 * tracing is on). Manual spans rather than auto-instrumentation: production runs compiled ES modules, which
 * monkey-patching instrumentations do not reach without a loader hook, and the few calls worth a span are
 * ours to name.
 */

let enabled = false

/** Called by sdk.ts once the SDK is registered; until then every helper here does no tracing work. */
export function enableSpans(): void {
  enabled = true
}

/** Whether tracing is on in this process. */
export function spansEnabled(): boolean {
  return enabled
}

/** The gateway's tracer (resolved per call: the API hands out a proxy until the SDK registers). */
export function tracer() {
  return trace.getTracer(serviceName, version)
}

/** The W3C headers (`traceparent`, and `tracestate` when there is one) that name `span` as the parent. */
export function traceHeaders(span: Span | null, parent: Context = context.active()): Record<string, string> {
  const out: Record<string, string> = {}
  if (span !== null) propagation.inject(trace.setSpan(parent, span), out)
  return out
}

/** Marks `span` failed with `err` (its class and message; never a payload). */
export function failSpan(span: Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err)
  span.setStatus({ code: SpanStatusCode.ERROR, ...(err instanceof Error ? { message: err.message } : {}) })
}

/**
 * Runs `fn` in a client span named `name` (a call to Redis or a runtime), active for what `fn` starts; a
 * throw marks the span failed and is rethrown. Without tracing, `fn(null)` and nothing else.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span | null) => Promise<T>,
): Promise<T> {
  // Not async: with tracing off the caller gets fn's own promise, not one more wrapped around it.
  if (!enabled) return fn(null)
  return tracer().startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await fn(span)
    } catch (err) {
      failSpan(span, err)
      throw err
    } finally {
      span.end()
    }
  })
}

/** Attributes of a Redis call (OpenTelemetry's database conventions); `operation` is our script's name. */
export function redisAttributes(operation: string, more: Attributes): Attributes {
  return { 'db.system.name': 'redis', 'db.operation.name': operation, ...more }
}

/**
 * undici's `request` in a client span `GET <what>` that ends when the answer's headers arrive (a stream's
 * body may last hours), with its status recorded and `traceparent` sent, so the runtime can join the trace.
 */
export function tracedRequest(
  what: string,
  attributes: Attributes,
  url: URL,
  options: NonNullable<Parameters<typeof request>[1]> & { method: string; headers: Record<string, string> },
): Promise<Dispatcher.ResponseData<unknown>> {
  return inSpan(
    `${options.method} ${what}`,
    { 'http.request.method': options.method, 'server.address': url.hostname, ...attributes },
    async (span) => {
      const res = await request(url, { ...options, headers: { ...options.headers, ...traceHeaders(span) } })
      span?.setAttribute('http.response.status_code', res.statusCode)
      if (res.statusCode >= 400) span?.setStatus({ code: SpanStatusCode.ERROR })
      return res
    },
  )
}
