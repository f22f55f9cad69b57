// Settings of `floodgate serve` for Redis authentication on a Cluster or Sentinels (upstream's REDIS_AUTH with
// REDIS_TYPE cluster or sentinel, and REDIS_SENTINEL_AUTH). Flags: REDIS_AUTH_OPTIONS in redis-auth-options.ts.

import { z } from 'zod'

/** Credentials for Redis's AUTH: a password, with a user name for an ACL user. */
export interface RedisAuth {
  username?: string
  password: string
}

/** The zod fields of these options, spread into the settings schema. */
export function redisAuthFields() {
  return {
    redisAuth: z.string().min(1).optional(),
    redisSentinelAuth: z.string().min(1).optional(),
  }
}

interface Raw {
  redisAuth?: string
  redisSentinelAuth?: string
  redisUrl?: string
  redisCluster?: unknown
  redisSentinels?: unknown
}

/** What does not go together, each with its reason: a secret given where it would not be used is reported, not ignored. */
export function redisAuthIssues(o: Raw, issue: (path: string, message: string) => void): void {
  if (o.redisAuth !== undefined && o.redisCluster === undefined && o.redisSentinels === undefined) {
    issue(
      'redisAuth',
      o.redisUrl === undefined
        ? 'applies to a Redis Cluster or Sentinels: add --redis-cluster or --redis-sentinel'
        : 'with --redis, put the credentials in the URL: redis://user:password@host:port',
    )
  }
  if (o.redisSentinelAuth !== undefined && o.redisSentinels === undefined) {
    issue('redisSentinelAuth', 'applies to Sentinels: add --redis-sentinel')
  }
}

/**
 * "password" or "user:password", split at the first colon as upstream's dialer splits REDIS_AUTH
 * (src/redis/driver_impl.go), so the same value means the same user in both.
 */
export function parseRedisAuth(value: string): RedisAuth {
  const colon = value.indexOf(':')
  return colon < 0 ? { password: value } : { username: value.slice(0, colon), password: value.slice(colon + 1) }
}

/** ioredis options for AUTH with `auth`: its own `username` and `password`. */
export function authOptions(auth: RedisAuth | undefined): { username?: string; password?: string } {
  if (auth === undefined) return {}
  return auth.username === undefined ? { password: auth.password } : { username: auth.username, password: auth.password }
}
