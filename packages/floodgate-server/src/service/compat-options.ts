// The options of `floodgate serve` for sharing envoyproxy/ratelimit's counters (--compat-keys envoy). Pure data, as
// serve-options.ts.

import type { OptionSpec } from './serve-options.js'

export const COMPAT_OPTIONS = {
  compatKeys: { flag: 'compat-keys', env: 'FLOODGATE_COMPAT_KEYS', type: 'string', help: "envoy: share envoyproxy/ratelimit's counters" },
  compatPrefix: {
    flag: 'compat-prefix',
    env: 'FLOODGATE_COMPAT_PREFIX',
    type: 'string',
    help: "upstream's CACHE_KEY_PREFIX (default empty)",
  },
  redisPerSecond: {
    flag: 'redis-per-second',
    env: 'FLOODGATE_REDIS_PER_SECOND',
    type: 'string',
    help: "upstream's per-second Redis URL (as --redis)",
  },
  // Upstream's EXPIRATION_JITTER_MAX_SECONDS, with its default: a manifest that never set it gets what upstream gives it.
  compatExpiryJitter: {
    flag: 'compat-expiry-jitter',
    env: 'FLOODGATE_COMPAT_EXPIRY_JITTER',
    type: 'string',
    help: "seconds, at most, added at random to each shared counter's expiry, as upstream (default 300; 0: none)",
  },
} as const satisfies Record<string, OptionSpec>
