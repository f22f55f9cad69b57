// `floodgate serve --help`: the options grouped by concern, each with a typed placeholder, its
// default and its environment variable, within 100 columns; and "did you mean" for a mistyped flag.
// It imports only the options table, so help and mistakes answer without loading the service.

import { closest, distance } from 'fastest-levenshtein'
import { type OptionName, type OptionSpec, SERVE_OPTIONS } from './serve-options.js'

/** The widest line of the help: terminals of 100 columns, and man-page habits, read it unwrapped. */
export const HELP_WIDTH = 100

/**
 * The groups of the help, in order, each with its options in order. Every option belongs to exactly
 * one group (a test holds it), so a new flag has to be placed where a user looks for it.
 */
export const HELP_GROUPS: readonly { title: string; options: readonly OptionName[] }[] = [
  { title: 'Rules', options: ['config', 'noWatch'] },
  {
    title: 'Listening',
    options: ['host', 'httpPort', 'grpcPort', 'noHttp', 'noGrpc', 'adminToken', 'dashboardRawKeys'],
  },
  {
    title: 'gRPC TLS and sockets',
    options: [
      'grpcTls',
      'grpcTlsCert',
      'grpcTlsKey',
      'grpcClientCa',
      'grpcClientSan',
      'grpcSocket',
      'grpcMaxConnectionAge',
      'grpcMaxConnectionAgeGrace',
      'noGrpcAwaitSettings',
      'grpcCloseBatch',
    ],
  },
  {
    title: 'Store',
    options: [
      'redisUrl',
      'redisCluster',
      'redisSentinels',
      'sentinelName',
      'redisAuth',
      'redisSentinelAuth',
      'redisTls',
      'redisTlsCa',
      'redisTlsCert',
      'redisTlsKey',
      'redisTlsSkipHostnameVerification',
      'memcached',
      'memcacheSrv',
      'memcacheSrvRefresh',
      'dnsServer',
      'memcacheTls',
      'memcacheTlsCa',
      'memcacheTlsCert',
      'memcacheTlsKey',
      'memcacheTlsSkipHostnameVerification',
      'redisPrefix',
      'memoryMaxKeys',
      'memoryMaxBytes',
      'onStoreError',
      'instances',
      'storeTimeout',
      'storeTimeoutMax',
      'healthCheckStore',
      'healthRequiresRules',
    ],
  },
  {
    title: 'Envoy compatibility (envoyproxy/ratelimit)',
    options: [
      'compatKeys',
      'compatPrefix',
      'redisPerSecond',
      'compatExpiryJitter',
      'wildcardOrder',
      'stopIncrement',
      'globalShadowMode',
      'globalQuotaMode',
      'dynamicMetadata',
      'grpcResponseHeaders',
      'mergeDomains',
      'limitHeader',
      'remainingHeader',
      'resetHeader',
      'nearLimitRatio',
      'maxDescriptors',
      'maxDescriptorEntries',
      'grpcMaxMessage',
    ],
  },
  { title: 'Regions (docs/regions.md)', options: ['region', 'peer', 'regionInterval', 'regionsFile'] },
  {
    title: 'Limits and timeouts',
    options: [
      'requestTimeout',
      'connectionTimeout',
      'keepAliveTimeout',
      'maxConnections',
      'bodyLimit',
      'shutdownTimeout',
      'grpcMaxConnections',
      'grpcIdleTimeout',
      'grpcHandshakeTimeout',
      'grpcKeepaliveMinTime',
      'grpcMaxConcurrentStreams',
    ],
  },
  { title: 'Observability', options: ['logLevel', 'logFormat', 'upstreamMetrics'] },
  {
    title: 'statsd and tracing (docs/service.md)',
    options: [
      'statsd',
      'statsdFormat',
      'statsdProtocol',
      'statsdTags',
      'statsdInterval',
      'statsdMogrifier',
      'tracing',
      'tracingProtocol',
      'tracingEndpoint',
      'tracingServiceName',
      'tracingServiceNamespace',
      'tracingServiceInstanceId',
      'tracingSamplingRate',
    ],
  },
]

/**
 * What a string option's value is, shown after its flag. Durations take `ms`, `s`, `m`, `h`
 * (parseDuration); lists are comma-separated. A string option missing here shows `<value>`, which a
 * test refuses.
 */
export const PLACEHOLDERS: Partial<Record<OptionName, string>> = {
  config: '<file|dir>',
  redisUrl: '<url>',
  redisCluster: '<host:port,…>',
  redisSentinels: '<host:port,…>',
  sentinelName: '<name>',
  redisAuth: '<[user:]password>',
  redisSentinelAuth: '<[user:]password>',
  redisPrefix: '<prefix>',
  memcached: '<host:port,…>',
  memcacheSrv: '<_service._proto.name>',
  memcacheSrvRefresh: '<duration>',
  dnsServer: '<ip[:port],…>',
  compatKeys: '<envoy>',
  compatPrefix: '<prefix>',
  redisPerSecond: '<url>',
  compatExpiryJitter: '<seconds>',
  redisTlsCa: '<file>',
  redisTlsCert: '<file>',
  redisTlsKey: '<file>',
  memcacheTlsCa: '<file>',
  memcacheTlsCert: '<file>',
  memcacheTlsKey: '<file>',
  host: '<address>',
  httpPort: '<port>',
  grpcPort: '<port>',
  adminToken: '<token>',
  onStoreError: '<mode>',
  instances: '<count>',
  storeTimeout: '<duration>',
  storeTimeoutMax: '<duration>',
  logLevel: '<level>',
  bodyLimit: '<bytes>',
  nearLimitRatio: '<0..1>',
  shutdownTimeout: '<duration>',
  wildcardOrder: '<order>',
  limitHeader: '<header>',
  remainingHeader: '<header>',
  resetHeader: '<header>',
  maxDescriptors: '<count>',
  maxDescriptorEntries: '<count>',
  grpcMaxMessage: '<bytes>',
  logFormat: '<format>',
  region: '<name>',
  peer: '<name=url>',
  regionInterval: '<duration>',
  regionsFile: '<file>',
  requestTimeout: '<duration>',
  connectionTimeout: '<duration>',
  keepAliveTimeout: '<duration>',
  maxConnections: '<count>',
  memoryMaxKeys: '<count>',
  memoryMaxBytes: '<bytes>',
  grpcMaxConnections: '<count>',
  grpcIdleTimeout: '<duration>',
  grpcHandshakeTimeout: '<duration>',
  grpcKeepaliveMinTime: '<duration>',
  grpcMaxConcurrentStreams: '<count>',
  statsd: '<host:port>',
  statsdFormat: '<format>',
  statsdProtocol: '<tcp|udp>',
  statsdTags: '<key:value,…>',
  statsdInterval: '<duration>',
  statsdMogrifier: '<name>',
  tracingProtocol: '<protocol>',
  tracingEndpoint: '<url>',
  tracingServiceName: '<name>',
  tracingServiceNamespace: '<namespace>',
  tracingServiceInstanceId: '<id>',
  tracingSamplingRate: '<0..1>',
  grpcTlsCert: '<file>',
  grpcTlsKey: '<file>',
  grpcClientCa: '<file>',
  grpcClientSan: '<name>',
  grpcSocket: '<path>',
  grpcMaxConnectionAge: '<duration>',
  grpcCloseBatch: '<count>',
  grpcMaxConnectionAgeGrace: '<duration>',
}

const FLAG_COLUMN = 34

/** The flag as the help shows it: `--store-timeout <duration>`. */
export function flagWithPlaceholder(name: OptionName): string {
  const spec: OptionSpec = SERVE_OPTIONS[name]
  return spec.type === 'boolean' ? `--${spec.flag}` : `--${spec.flag} ${PLACEHOLDERS[name] ?? '<value>'}`
}

/** The help text of `floodgate serve`. */
export function serveUsage(): string {
  const lines = [
    'Usage: floodgate serve --config <file|dir> [options]',
    '',
    'Runs the rate-limit service: HTTP JSON API, Envoy gRPC API, Prometheus metrics.',
    'Each option is also read from the environment variable under it; a flag wins over its variable.',
    "envoyproxy/ratelimit's own variables (REDIS_URL, PORT, …) are read too: see docs/envoy.md.",
    'CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from an xDS management server instead of --config',
    '(CONFIG_GRPC_XDS_SERVER_URL, CONFIG_GRPC_XDS_NODE_ID, …; docs/service.md#rules-from-xds).',
  ]
  for (const group of HELP_GROUPS) {
    lines.push('', `${group.title}:`)
    for (const name of group.options) lines.push(...optionLines(name))
  }
  return lines.join('\n')
}

// One option: the flag and the start of its help on the first line (or the flag alone when it is
// wider than its column), the rest of the help wrapped under the help column, then the variable.
function optionLines(name: OptionName): string[] {
  const flag = `  ${flagWithPlaceholder(name)}`
  const help = wrap(SERVE_OPTIONS[name].help, HELP_WIDTH - FLAG_COLUMN)
  const indent = ' '.repeat(FLAG_COLUMN)
  const lines = flag.length < FLAG_COLUMN ? [flag.padEnd(FLAG_COLUMN) + help[0]] : [flag, indent + help[0]]
  for (const rest of help.slice(1)) lines.push(indent + rest)
  lines.push(`${indent}env ${SERVE_OPTIONS[name].env}`)
  return lines
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else {
      line = line === '' ? word : `${line} ${word}`
    }
  }
  lines.push(line)
  return lines
}

/**
 * The first `--flag` of `argv` that `serve` does not know, with the closest known flag when one is
 * near enough to be a typo; undefined when every flag is known. Flags after `--` are arguments.
 */
export function unknownFlag(argv: readonly string[]): { flag: string; suggestion?: string } | undefined {
  const known = Object.values(SERVE_OPTIONS).map((spec: OptionSpec) => spec.flag)
  for (const arg of argv) {
    if (arg === '--') return undefined
    if (!arg.startsWith('--')) continue
    const name = arg.slice(2).split('=')[0]
    if (known.includes(name)) continue
    return { flag: `--${name}`, suggestion: suggest(name, known) }
  }
  return undefined
}

/** The candidate nearest to `word` when it is a plausible typo of it (a third of its letters at most). */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined
  const best = closest(word, [...candidates])
  return distance(word, best) <= Math.max(2, Math.floor(best.length / 3)) ? best : undefined
}

/** The error line for an unknown flag in `argv` (with its likely meaning), or undefined when all are known. */
export function unknownFlagMessage(argv: readonly string[]): string | undefined {
  const unknown = unknownFlag(argv)
  if (unknown === undefined) return undefined
  const hint = unknown.suggestion === undefined ? '' : `; did you mean --${unknown.suggestion}?`
  return `unknown option ${unknown.flag}${hint} (floodgate serve --help lists them)`
}
