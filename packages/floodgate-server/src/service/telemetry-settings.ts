// Settings of `floodgate serve` for statsd and OpenTelemetry tracing: their zod fields, spread into the
// settings schema, and the mogrifiers read from DOG_STATSD_MOGRIFIER_* (see statsd-mogrifiers.ts).

import { z } from 'zod'
import { FloodgateError } from 'floodgate'
import { durationMs } from './setting-values.js'
import { readMogrifiers, type Mogrifier } from './statsd-mogrifiers.js'

/** Where and how upstream's stats are sent. */
export interface StatsdSettings {
  host: string
  port: number
  /** `statsd`: tags serialized into the name (`.__key=value`), as upstream's statsd sink; `dogstatsd`: DogStatsD tags. */
  format: 'statsd' | 'dogstatsd'
  protocol: 'tcp' | 'udp'
  /** EXTRA_TAGS, in the order given. */
  tags: readonly (readonly [string, string])[]
  /** How often the counters' increments are sent. */
  intervalMs: number
  /** DogStatsD only: name-to-tags rewrites, the first that matches applies. */
  mogrifiers: readonly Mogrifier[]
}

export interface TracingSettings {
  protocol: 'http/protobuf' | 'http/json' | 'grpc'
  /** The receiver's URL; undefined: the exporter's default (localhost:4318, or 4317 for grpc). */
  endpoint: string | undefined
  serviceName: string
  serviceNamespace: string | undefined
  serviceInstanceId: string | undefined
  /** Fraction of traces started here that are sampled; a sampled flag from Envoy's traceparent wins. */
  samplingRate: number
}

/** What these options set, part of Settings. */
export interface TelemetrySettings {
  /** undefined: no statsd export. */
  statsd?: StatsdSettings
  /** undefined: no tracing (nothing of OpenTelemetry is loaded). */
  tracing?: TracingSettings
}

const tagList = z
  .string()
  .optional()
  .transform((list, ctx) => {
    const tags: [string, string][] = []
    for (const item of (list ?? '').split(',').map((s) => s.trim())) {
      if (item === '') continue
      const at = item.indexOf(':')
      if (at <= 0) {
        ctx.addIssue({ code: 'custom', message: `expected key:value, got ${JSON.stringify(item)}` })
        return z.NEVER
      }
      tags.push([item.slice(0, at), item.slice(at + 1)])
    }
    return tags
  })

/** The zod schema of these options (parsed beside settings-schema.ts's, from the same raw values). */
export const telemetrySchema = z.object({
  statsd: z
    .string()
    .regex(/^.+:\d{1,5}$/, 'expected host:port, e.g. localhost:8125')
    .optional(),
  statsdFormat: z.enum(['statsd', 'dogstatsd'], { error: 'expected statsd or dogstatsd' }).optional(),
  statsdProtocol: z.enum(['tcp', 'udp'], { error: 'expected tcp or udp' }).optional(),
  statsdTags: tagList,
  statsdInterval: durationMs(10_000),
  statsdMogrifier: z.array(z.string().regex(/^\w+$/, 'expected a mogrifier name (letters, digits, _)')).optional(),
  tracing: z.boolean().optional(),
  tracingProtocol: z.enum(['http/protobuf', 'http/json', 'grpc'], { error: 'expected http/protobuf, http/json or grpc' }).optional(),
  tracingEndpoint: z.url({ error: 'expected a URL, e.g. http://collector:4318/v1/traces' }).optional(),
  tracingServiceName: z.string().min(1).optional(),
  tracingServiceNamespace: z.string().optional(),
  tracingServiceInstanceId: z.string().optional(),
  tracingSamplingRate: z
    .string()
    .transform(Number)
    .refine((n) => n >= 0 && n <= 1, 'expected a fraction in [0, 1], e.g. 0.1')
    .optional(),
})

type Fields = z.output<typeof telemetrySchema>

/**
 * The parsed fields as settings; `env` holds the mogrifiers' definitions and the OTLP exporter's
 * standard variables. Throws FloodgateError (INVALID_OPTION) for a mogrifier that is not defined.
 */
export function telemetrySettings(o: Fields, env: NodeJS.ProcessEnv): TelemetrySettings {
  return { statsd: statsdSettings(o, env), tracing: tracingSettings(o, env) }
}

function statsdSettings(o: Fields, env: NodeJS.ProcessEnv): StatsdSettings | undefined {
  const mogrifierNames = o.statsdMogrifier ?? []
  if (o.statsd === undefined) {
    if (o.statsdFormat !== undefined || mogrifierNames.length > 0)
      throw new FloodgateError('INVALID_OPTION', '--statsd-format and --statsd-mogrifier need --statsd host:port (FLOODGATE_STATSD)')
    return undefined
  }
  const format = o.statsdFormat ?? 'statsd'
  if (format !== 'dogstatsd' && mogrifierNames.length > 0) {
    throw new FloodgateError('INVALID_OPTION', '--statsd-mogrifier rewrites names into DogStatsD tags: add --statsd-format dogstatsd')
  }
  const at = o.statsd.lastIndexOf(':')
  const port = Number(o.statsd.slice(at + 1))
  if (port < 1 || port > 65_535) throw new FloodgateError('INVALID_OPTION', `--statsd / FLOODGATE_STATSD: ${port} is not a port`)
  return {
    host: o.statsd.slice(0, at).replace(/^\[(.*)\]$/, '$1'),
    port,
    format,
    // As upstream: its statsd sink speaks TCP, its DogStatsD client UDP.
    protocol: o.statsdProtocol ?? (format === 'dogstatsd' ? 'udp' : 'tcp'),
    tags: o.statsdTags,
    intervalMs: o.statsdInterval,
    mogrifiers: readMogrifiers(mogrifierNames, env),
  }
}

function tracingSettings(o: Fields, env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (!o.tracing) return undefined
  const standard = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || undefined
  if (o.tracingProtocol === undefined && standard !== undefined && !['http/protobuf', 'http/json', 'grpc'].includes(standard)) {
    throw new FloodgateError('INVALID_OPTION', `OTEL_EXPORTER_OTLP_PROTOCOL=${standard}: expected http/protobuf, http/json or grpc`)
  }
  const protocol = o.tracingProtocol ?? (standard as TracingSettings['protocol'] | undefined) ?? 'http/protobuf'
  return {
    protocol,
    endpoint: o.tracingEndpoint ?? standardEndpoint(env, protocol),
    serviceName: o.tracingServiceName ?? 'floodgate',
    serviceNamespace: o.tracingServiceNamespace || undefined,
    serviceInstanceId: o.tracingServiceInstanceId || undefined,
    samplingRate: o.tracingSamplingRate ?? 1,
  }
}

/**
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else OTEL_EXPORTER_OTLP_ENDPOINT with the traces path
 * added for HTTP, as the OTLP exporter specification says. Read here, from the environment the
 * settings come from; the exporter reads the other OTEL_EXPORTER_OTLP_* (headers, certificates,
 * timeout) from the process's.
 */
function standardEndpoint(env: NodeJS.ProcessEnv, protocol: TracingSettings['protocol']): string | undefined {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT
  if (!base) return undefined
  return protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/traces`
}
