import { DiagLogLevel, diag } from '@opentelemetry/api'
import type { FastifyBaseLogger } from 'fastify'
import type { TracingConfig } from '../config.ts'
import { version } from '../version.ts'
import { enableSpans } from './spans.ts'

/** A started tracing SDK: flush and stop it last at shutdown, so the final spans are exported. */
export interface TracingSdk {
  /** Sends the SDK's own warnings (an export the collector refused or never answered) to the app's log. */
  logTo(log: FastifyBaseLogger): void
  shutdown(): Promise<void>
}

/**
 * Loads and registers the OpenTelemetry SDK (only called when tracing is on, so the default path never loads
 * it): a tracer provider for `service.name`/`service.version`, the W3C trace-context propagator, an
 * AsyncLocalStorage context manager, and a batch processor exporting OTLP over HTTP in the configured
 * encoding. Endpoint, headers, timeouts, sampler and batch settings are the SDK's own reading of the
 * standard OTEL_* variables.
 */
export async function startTracing(config: TracingConfig): Promise<TracingSdk> {
  const [{ NodeTracerProvider, BatchSpanProcessor }, { resourceFromAttributes }, { OTLPTraceExporter }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/resources'),
      config.protocol === 'http/json'
        ? import('@opentelemetry/exporter-trace-otlp-http')
        : import('@opentelemetry/exporter-trace-otlp-proto'),
    ])
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName, 'service.version': version }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  })
  provider.register()
  enableSpans()
  return {
    logTo(log) {
      const warn = (message: string, ...args: unknown[]) =>
        log.warn({ detail: args.map(String).join(' ') }, `tracing: ${message}`)
      diag.setLogger(
        { error: warn, warn, info: () => {}, debug: () => {}, verbose: () => {} },
        DiagLogLevel.WARN,
      )
      log.info(
        { serviceName: config.serviceName, protocol: config.protocol },
        'tracing: exporting spans (OTLP)',
      )
    },
    shutdown: () => provider.shutdown(),
  }
}
