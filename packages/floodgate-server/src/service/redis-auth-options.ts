// The options of `floodgate serve` for Redis authentication where a URL cannot carry it: Cluster nodes, and a
// Sentinel setup's master and Sentinels. Pure data, as serve-options.ts.

import type { OptionSpec } from './serve-options.js'

// A secret on a command line is visible to every user of the machine (ps): the help points at the variables.
export const REDIS_AUTH_OPTIONS = {
  redisAuth: {
    flag: 'redis-auth',
    env: 'FLOODGATE_REDIS_AUTH',
    type: 'string',
    help: "password or user:password for Cluster nodes or the Sentinels' master (prefer the variable; a URL carries its own)",
  },
  redisSentinelAuth: {
    flag: 'redis-sentinel-auth',
    env: 'FLOODGATE_REDIS_SENTINEL_AUTH',
    type: 'string',
    help: 'password or user:password for the Sentinels themselves (prefer the variable)',
  },
} as const satisfies Record<string, OptionSpec>
