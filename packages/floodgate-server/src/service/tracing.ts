// OpenTelemetry tracing of the decision APIs: one span per ShouldRateLimit (gRPC or Envoy's /json) and per
// /v1/check, continuing the caller's trace (W3C `traceparent` or B3), and one per store call under it,
// exported over OTLP. The SDK is loaded only with --tracing; the library only offers the `onStoreCall`
// hook that the store spans come from.

import { AsyncLocalStorage } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { Context, Tracer } from '@opentelemetry/api'
import type { Logger } from 'pino'
import type { StoreCallHook } from 'floodgate'
import type { TracingSettings } from './telemetry-settings.js'

/** The HTTP routes that decide, each traced as one span per request. */
export type TracedRoute = '/json' | '/v1/check'

/** What the gRPC server, the HTTP server and the limiter call; present only while tracing is on. */
export interface Tracing {
  /** Runs one ShouldRateLimit call in its span, the child of the caller's `traceparent` (or B3) when it sent one. */
  shouldRateLimit<T>(headers: IncomingHttpHeaders, domain: () => string | undefined, run: () => Promise<T>): Promise<T>
  /**
   * Runs one HTTP decision in its span, likewise. `/json` is ShouldRateLimit over HTTP, so its span
   * has that name too (upstream's /json calls the same ShouldRateLimit and its span); `/v1/check` is
   * Floodgate's own API, named as OpenTelemetry names an HTTP server span (`POST /v1/check`).
   * `run` includes reading the body, so a request that is refused has its span too, marked failed.
   */
  httpDecision<T>(
    route: TracedRoute,
    method: string,
    headers: IncomingHttpHeaders,
    domain: () => string | undefined,
    run: () => Promise<T>,
  ): Promise<T>
  /** The limiter's onStoreCall: a span per store call, under the call's ShouldRateLimit span. */
  readonly onStoreCall: StoreCallHook
  /** Exports what is buffered, then stops. */
  close(): Promise<void>
}

const SPAN_KIND_SERVER = 1
const SPAN_KIND_CLIENT = 2
const STATUS_ERROR = 2

/** Loads the SDK and the exporter of `settings.protocol`, and starts a tracer provider of its own (not the global one). */
export async function startTracing(settings: TracingSettings, storeKind: string, logger: Logger): Promise<Tracing> {
  const api = await import('@opentelemetry/api')
  const { BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } = await import(
    '@opentelemetry/sdk-trace-base'
  )
  const { resourceFromAttributes } = await import('@opentelemetry/resources')
  const { CompositePropagator, W3CTraceContextPropagator } = await import('@opentelemetry/core')
  const { B3Propagator } = await import('@opentelemetry/propagator-b3')
  const exporter = await createExporter(settings)
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': settings.serviceName,
      ...(settings.serviceNamespace === undefined ? {} : { 'service.namespace': settings.serviceNamespace }),
      // As upstream: a random instance id when none is given.
      'service.instance.id': settings.serviceInstanceId ?? randomUUID(),
    }),
    // As upstream: a sampled (or unsampled) parent from Envoy decides; the rate applies to new traces.
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.samplingRate) }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  })
  const tracer: Tracer = provider.getTracer('floodgate')
  // Upstream's order: W3C traceparent, then B3 (single or multi-header, as Envoy's Zipkin tracer sends it).
  const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new B3Propagator()] })
  // The request's context, carried to its store calls through the awaits between them.
  const current = new AsyncLocalStorage<Context>()
  const to = settings.endpoint === undefined ? '' : ` to ${settings.endpoint}`
  logger.info(`tracing: exporting spans over OTLP ${settings.protocol}${to}, sampling ${settings.samplingRate}`)
  /** Runs `run` in a new server span under the trace `headers` carry; a throw or a rejection marks it failed. */
  const served = <T>(name: string, headers: IncomingHttpHeaders, attributes: Attributes, run: () => Promise<T>): Promise<T> => {
    const parent = propagator.extract(api.ROOT_CONTEXT, headers, api.defaultTextMapGetter)
    const span = tracer.startSpan(name, { kind: SPAN_KIND_SERVER, attributes }, parent)
    let answer: Promise<T>
    try {
      answer = current.run(api.trace.setSpan(parent, span), run)
    } catch (error) {
      // A request that does not parse throws before it has a promise: its span ends, failed, all the same.
      answer = Promise.reject(error)
    }
    return answer.then(
      (result) => {
        span.end()
        return result
      },
      (error: unknown) => {
        span.setStatus({ code: STATUS_ERROR, message: (error as Error)?.message })
        span.end()
        throw error
      },
    )
  }
  return {
    shouldRateLimit(headers, domain, run) {
      return served('ShouldRateLimit Execution', headers, domainAttribute(domain()), run)
    },
    httpDecision(route, method, headers, domain, run) {
      const name = route === '/json' ? 'ShouldRateLimit Execution' : `${method} ${route}`
      const attributes = { ...domainAttribute(domain()), 'http.request.method': method, 'http.route': route }
      return served(name, headers, attributes, run)
    },
    onStoreCall(_key, cost) {
      const parent = current.getStore()
      // A store call outside a traced request (a sync engine's flush, a lease refill) has no span.
      if (parent === undefined) return undefined
      const span = tracer.startSpan(`store ${storeKind}`, { kind: SPAN_KIND_CLIENT, attributes: { cost } }, parent)
      return (failed) => {
        if (failed) span.setStatus({ code: STATUS_ERROR, message: 'the store failed or timed out' })
        span.end()
      }
    },
    close: () => provider.shutdown(),
  }
}

/** Span attributes: the request's domain, when it has one. */
type Attributes = Record<string, string>

function domainAttribute(domain: string | undefined): Attributes {
  return domain === undefined ? {} : { domain }
}

/** The OTLP exporter of the protocol; with no endpoint it reads OTEL_EXPORTER_OTLP_* itself. */
async function createExporter(settings: TracingSettings) {
  const options = settings.endpoint === undefined ? {} : { url: settings.endpoint }
  if (settings.protocol === 'grpc') return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter(options)
  if (settings.protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(options)
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter(options)
}
