import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One span as it arrived over OTLP/HTTP JSON, with its resource's `service.name` and flattened attributes. */
export interface ReceivedSpan {
  service: string
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** OTLP's SpanKind: 2 server, 3 client. */
  kind: number
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number
  attributes: Record<string, string | number | boolean>
}

/** A real OTLP/HTTP receiver on 127.0.0.1 port 0: POST /v1/traces with the JSON encoding. */
export interface OtlpReceiver {
  /** The base URL to put in OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends `/v1/traces`). */
  readonly url: string
  readonly spans: ReceivedSpan[]
  /** Content types of every POST, to tell the encodings apart. */
  readonly contentTypes: string[]
  close(): Promise<void>
}

interface AnyValue {
  stringValue?: string
  intValue?: number | string
  boolValue?: boolean
  doubleValue?: number
}
interface KeyValue {
  key: string
  value: AnyValue
}
interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] }
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string
        spanId: string
        parentSpanId?: string
        name: string
        kind: number
        status?: { code?: number }
        attributes?: KeyValue[]
      }>
    }>
  }>
}

function flatten(attributes: KeyValue[] = []): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const { key, value } of attributes) {
    const v = value.stringValue ?? value.boolValue ?? value.doubleValue ?? value.intValue
    if (v !== undefined) out[key] = typeof v === 'string' && value.intValue !== undefined ? Number(v) : v
  }
  return out
}

/** Starts the receiver; it answers every export 200 (an empty ExportTraceServiceResponse); JSON is decoded. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const contentTypes: string[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      contentTypes.push(String(req.headers['content-type']))
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end()
        return
      }
      const json = String(req.headers['content-type']).startsWith('application/json')
      if (json) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest
        for (const rs of body.resourceSpans ?? []) {
          const service = String(flatten(rs.resource?.attributes)['service.name'] ?? '')
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                status: s.status?.code ?? 0,
                attributes: flatten(s.attributes),
              })
        }
      }
      // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
      if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
