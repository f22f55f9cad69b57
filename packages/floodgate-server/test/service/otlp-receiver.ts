// An in-process OTLP/HTTP trace receiver for the tests: accepts POST /v1/traces in protobuf or JSON
// and keeps the spans, decoded with the messages of opentelemetry-proto's trace service.

import http from 'node:http'
import { once } from 'node:events'
import protobuf from 'protobufjs'

// The fields of opentelemetry-proto (opentelemetry/proto/collector/trace/v1/trace_service.proto and
// the trace, resource and common protos it imports) that the tests read, with their numbers.
const OTLP_TRACE_PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  Status status = 15;
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; }
}
`

const ExportRequest = protobuf.parse(OTLP_TRACE_PROTO).root.lookupType('otlp.ExportTraceServiceRequest')

/** One received span, ids in hex, attributes as plain values, with its resource's attributes. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  attributes: Record<string, unknown>
  statusCode: number
  resource: Record<string, unknown>
}

export interface OtlpReceiver {
  /** The traces URL to export to. */
  readonly url: string
  readonly spans: ReceivedSpan[]
  /** Export requests received, and their content types. */
  readonly contentTypes: string[]
  close(): Promise<void>
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const contentTypes: string[] = []
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end()
        return
      }
      const type = request.headers['content-type'] ?? ''
      contentTypes.push(type)
      const body = Buffer.concat(chunks)
      const decoded = type.startsWith('application/json')
        ? JSON.parse(body.toString('utf8'))
        : ExportRequest.toObject(ExportRequest.decode(body), { longs: String, bytes: String, defaults: true })
      spans.push(...spansOf(decoded, type.startsWith('application/json')))
      // An empty ExportTraceServiceResponse: success, nothing rejected.
      response.writeHead(200, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' })
      response.end(type.startsWith('application/json') ? '{}' : Buffer.alloc(0))
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

// Protobuf bytes arrive base64 (toObject's `bytes: String`); OTLP/JSON sends ids in hex already.
function spansOf(request: any, json: boolean): ReceivedSpan[] {
  const hex = (id: string | undefined) => (json ? (id ?? '') : Buffer.from(id ?? '', 'base64').toString('hex'))
  const out: ReceivedSpan[] = []
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes)
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        out.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: span.kind,
          attributes: attributesOf(span.attributes),
          statusCode: span.status?.code ?? 0,
          resource,
        })
      }
    }
  }
  return out
}

function attributesOf(list: { key: string; value: Record<string, unknown> }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const { key, value } of list ?? []) {
    // int64 arrives as a string (protobufjs longs: String; OTLP/JSON writes it quoted).
    out[key] =
      value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.doubleValue ?? value.boolValue
  }
  return out
}
