// The options of `floodgate serve` for memcached: servers from an SRV record, and TLS. Pure data, as serve-options.ts.

import type { OptionSpec } from './serve-options.js'

// memcached servers from an SRV record, looked up at start and, with a refresh, again (memcache-srv-settings.ts).
export const MEMCACHE_SRV_OPTIONS = {
  memcacheSrv: {
    flag: 'memcache-srv',
    env: 'FLOODGATE_MEMCACHE_SRV',
    type: 'string',
    help: 'memcached servers from this SRV record, e.g. _memcache._tcp.example.org',
  },
  memcacheSrvRefresh: {
    flag: 'memcache-srv-refresh',
    env: 'FLOODGATE_MEMCACHE_SRV_REFRESH',
    type: 'string',
    help: 'look the SRV record up again this often and use the new servers (default 0: at start only)',
  },
  dnsServer: {
    flag: 'dns-server',
    env: 'FLOODGATE_DNS_SERVER',
    type: 'string',
    help: "DNS servers asked for --memcache-srv, ip[:port],… (default the system's)",
  },
} as const satisfies Record<string, OptionSpec>

// TLS to memcached, for the store and --compat-keys envoy's counter (settings in memcache-tls-settings.ts).
export const MEMCACHE_TLS_OPTIONS = {
  memcacheTls: { flag: 'memcache-tls', env: 'FLOODGATE_MEMCACHE_TLS', type: 'boolean', help: 'reach memcached over TLS (memcached -Z)' },
  memcacheTlsCa: {
    flag: 'memcache-tls-ca',
    env: 'FLOODGATE_MEMCACHE_TLS_CA',
    type: 'string',
    help: 'PEM file of CAs trusted for memcached',
  },
  memcacheTlsCert: {
    flag: 'memcache-tls-cert',
    env: 'FLOODGATE_MEMCACHE_TLS_CERT',
    type: 'string',
    help: 'PEM client certificate for memcached',
  },
  memcacheTlsKey: { flag: 'memcache-tls-key', env: 'FLOODGATE_MEMCACHE_TLS_KEY', type: 'string', help: 'PEM key of --memcache-tls-cert' },
  memcacheTlsSkipHostnameVerification: {
    flag: 'memcache-tls-skip-hostname-verification',
    env: 'FLOODGATE_MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION',
    type: 'boolean',
    help: "verify memcached's certificate chain but not its name",
  },
} as const satisfies Record<string, OptionSpec>
