// envoyproxy/ratelimit's statsd and tracing variables, read into Floodgate's (upstream-env.ts calls this).

import { FloodgateError } from 'floodgate'

const TRUE = /^(1|true|t)$/i
const STATSD_VARIABLES = ['STATSD_HOST', 'STATSD_PORT', 'EXTRA_TAGS', 'STATS_FLUSH_INTERVAL', 'USE_DOG_STATSD_MOGRIFIERS']
const TRACING_VARIABLES = [
  'TRACING_SERVICE_NAME',
  'TRACING_SERVICE_NAMESPACE',
  'TRACING_SERVICE_INSTANCE_ID',
  'TRACING_SAMPLING_RATE',
  'TRACING_EXPORTER_PROTOCOL',
]

/**
 * USE_STATSD / USE_DOG_STATSD with STATSD_HOST, STATSD_PORT, EXTRA_TAGS, STATS_FLUSH_INTERVAL and
 * USE_DOG_STATSD_MOGRIFIERS; TRACING_ENABLED with TRACING_SERVICE_*, TRACING_SAMPLING_RATE and
 * TRACING_EXPORTER_PROTOCOL. `set` writes a Floodgate variable unless it is set already.
 *
 * One deliberate difference: upstream's USE_STATSD defaults to true; here statsd is sent only when
 * USE_STATSD (or USE_DOG_STATSD) says so, since Floodgate's own default export is Prometheus and
 * streaming to a localhost:8125 that nobody asked for would be a surprise.
 */
export function readUpstreamTelemetry(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void, notes: string[]): void {
  const useStatsd = TRUE.test(env.USE_STATSD ?? '')
  const useDogStatsd = TRUE.test(env.USE_DOG_STATSD ?? '')
  if (useStatsd && useDogStatsd) {
    throw new FloodgateError(
      'INVALID_OPTION',
      'USE_STATSD=true and USE_DOG_STATSD=true: give one stats sink, as upstream requires (set USE_STATSD=false for DogStatsD)',
    )
  }
  const disabled = TRUE.test(env.DISABLE_STATS ?? '')
  if (disabled || !(useStatsd || useDogStatsd)) {
    const why = disabled ? 'with DISABLE_STATS=true' : 'without USE_STATSD=true or USE_DOG_STATSD=true'
    for (const name of STATSD_VARIABLES)
      if (env[name]) notes.push(`${name} is ignored ${why}: no statsd is sent (metrics are on GET /metrics)`)
  } else {
    set('FLOODGATE_STATSD', `${env.STATSD_HOST || 'localhost'}:${env.STATSD_PORT || '8125'}`)
    set('FLOODGATE_STATSD_FORMAT', useDogStatsd ? 'dogstatsd' : 'statsd')
    if (env.EXTRA_TAGS) set('FLOODGATE_STATSD_TAGS', env.EXTRA_TAGS)
    if (env.STATS_FLUSH_INTERVAL) set('FLOODGATE_STATSD_INTERVAL', env.STATS_FLUSH_INTERVAL)
    if (useDogStatsd && env.USE_DOG_STATSD_MOGRIFIERS) set('FLOODGATE_STATSD_MOGRIFIERS', env.USE_DOG_STATSD_MOGRIFIERS)
  }
  if (!TRUE.test(env.TRACING_ENABLED ?? '')) {
    for (const name of TRACING_VARIABLES) if (env[name]) notes.push(`${name} is ignored without TRACING_ENABLED=true`)
    return
  }
  set('FLOODGATE_TRACING', 'true')
  // Upstream's default name, so existing trace queries keep finding the service.
  set('FLOODGATE_TRACING_SERVICE_NAME', env.TRACING_SERVICE_NAME || 'RateLimit')
  if (env.TRACING_SERVICE_NAMESPACE) set('FLOODGATE_TRACING_SERVICE_NAMESPACE', env.TRACING_SERVICE_NAMESPACE)
  if (env.TRACING_SERVICE_INSTANCE_ID) set('FLOODGATE_TRACING_SERVICE_INSTANCE_ID', env.TRACING_SERVICE_INSTANCE_ID)
  if (env.TRACING_SAMPLING_RATE) set('FLOODGATE_TRACING_SAMPLING_RATE', env.TRACING_SAMPLING_RATE)
  const protocol = (env.TRACING_EXPORTER_PROTOCOL || 'http').toLowerCase()
  if (protocol !== 'http' && protocol !== 'grpc')
    throw new FloodgateError('INVALID_OPTION', `TRACING_EXPORTER_PROTOCOL=${protocol}: expected http or grpc, as upstream`)
  // Upstream's http exporter sends protobuf.
  set('FLOODGATE_TRACING_PROTOCOL', protocol === 'grpc' ? 'grpc' : 'http/protobuf')
}
