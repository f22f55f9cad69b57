// The flags of `floodgate serve` for statsd and tracing (statsd.ts, tracing.ts); serve-options.ts spreads them in.
// Pure data, with no import: `floodgate serve --help` reads it without loading the service.

export const TELEMETRY_OPTIONS = {
  statsd: {
    flag: 'statsd',
    env: 'FLOODGATE_STATSD',
    type: 'string',
    help: "send envoyproxy/ratelimit's stats to this statsd server (default off)",
  },
  statsdFormat: {
    flag: 'statsd-format',
    env: 'FLOODGATE_STATSD_FORMAT',
    type: 'string',
    help: 'statsd (tags in the name, as upstream) | dogstatsd (tags as tags) (default statsd)',
  },
  statsdProtocol: {
    flag: 'statsd-protocol',
    env: 'FLOODGATE_STATSD_PROTOCOL',
    type: 'string',
    help: 'tcp | udp (default tcp for statsd, udp for dogstatsd, as upstream)',
  },
  statsdTags: {
    flag: 'statsd-tags',
    env: 'FLOODGATE_STATSD_TAGS',
    type: 'string',
    help: 'tags on every stat, as upstream EXTRA_TAGS (default none)',
  },
  statsdInterval: {
    flag: 'statsd-interval',
    env: 'FLOODGATE_STATSD_INTERVAL',
    type: 'string',
    help: 'how often counters are sent (default 10s)',
  },
  statsdMogrifier: {
    flag: 'statsd-mogrifier',
    env: 'FLOODGATE_STATSD_MOGRIFIERS',
    type: 'string',
    multiple: true,
    help: 'dogstatsd: names to tags by DOG_STATSD_MOGRIFIER_<NAME>_* (repeat; default none)',
  },
  tracing: {
    flag: 'tracing',
    env: 'FLOODGATE_TRACING',
    type: 'boolean',
    help: 'export OpenTelemetry spans over OTLP (endpoint: OTEL_EXPORTER_OTLP_*)',
  },
  tracingProtocol: {
    flag: 'tracing-protocol',
    env: 'FLOODGATE_TRACING_PROTOCOL',
    type: 'string',
    help: 'http/protobuf | http/json | grpc (default OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)',
  },
  tracingEndpoint: {
    flag: 'tracing-endpoint',
    env: 'FLOODGATE_TRACING_ENDPOINT',
    type: 'string',
    help: "the OTLP receiver's URL (default OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or _ENDPOINT)",
  },
  tracingServiceName: {
    flag: 'tracing-service-name',
    env: 'FLOODGATE_TRACING_SERVICE_NAME',
    type: 'string',
    help: 'service.name of the spans (default floodgate)',
  },
  tracingServiceNamespace: {
    flag: 'tracing-service-namespace',
    env: 'FLOODGATE_TRACING_SERVICE_NAMESPACE',
    type: 'string',
    help: 'service.namespace of the spans (default none)',
  },
  tracingServiceInstanceId: {
    flag: 'tracing-service-instance-id',
    env: 'FLOODGATE_TRACING_SERVICE_INSTANCE_ID',
    type: 'string',
    help: 'service.instance.id of the spans (default a random UUID)',
  },
  tracingSamplingRate: {
    flag: 'tracing-sampling-rate',
    env: 'FLOODGATE_TRACING_SAMPLING_RATE',
    type: 'string',
    help: "fraction of new traces sampled, 0..1; Envoy's sampled flag wins (default 1)",
  },
} as const
