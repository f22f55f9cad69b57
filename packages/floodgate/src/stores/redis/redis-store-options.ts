// RedisStore's options and events, and the client it builds (or checks) from them at construction.

import { FloodgateError } from '../../core/errors.js'
import { toConnection, type Connection, type RedisClientLike } from './connection.js'
import { createClient, type ClusterStartupNode } from './create-client.js'
import { nothing } from './pending-call.js'

/**
 * How to reach Redis: give exactly one of `client`, `url`, `redis` or `cluster`.
 * A client you pass stays yours (`close()` leaves it open); one the store creates is closed by `close()`.
 * To create one, the store uses the app's ioredis if it is installed, else its node-redis (the
 * `redis` package); with neither it throws at construction.
 * A store that cannot reach Redis prints one process warning (FLOODGATE_REDIS_UNAVAILABLE) and
 * emits 'unavailable' for each outage and 'available' when Redis answers again (RedisStoreEvents).
 */
export interface RedisStoreOptions {
  /**
   * A client of your own, recognised by its methods (any installed copy works):
   * - ioredis 5 or 6: `new Redis(...)` (standalone, or Sentinel with `{ sentinels, name }`) or
   *   `new Cluster(...)`. Consider `autoResendUnfulfilledCommands: false` (the default for clients
   *   the store creates), so a decision in flight when the connection drops is not applied again later.
   * - node-redis (the `redis` package, version 5 or later): `createClient(...)` or
   *   `createCluster(...)`; the store connects it if you have not. Consider `disableOfflineQueue: true`.
   * It must not have a `keyPrefix`: use `prefix`, because a client would prefix only the keys a
   * script declares, and on a Cluster the store declares only some of them.
   */
  client?: RedisClientLike
  /** A `redis://` or `rediss://` URL; the store creates the client (with `redis` as extra options). */
  url?: string
  /**
   * Options for a client the store creates, passed to the library that creates it: ioredis
   * `RedisOptions` (e.g. `{ sentinels: [...], name: 'mymaster' }`) or node-redis `createClient` options.
   */
  redis?: object
  /** Startup nodes of a Redis Cluster, e.g. `[{ host: '10.0.0.1', port: 7000 }]`; the store creates the cluster client. */
  cluster?: readonly ClusterStartupNode[]
  /** ioredis `ClusterOptions` (or node-redis `createCluster` options) for a cluster the store creates. */
  clusterOptions?: object
  /** Put before every key (default `fg:`), so several apps or environments can share one Redis. No braces. */
  prefix?: string
  /**
   * Most requests in one script call (default 512). Requests of one event-loop turn, and those that
   * wait behind a call in flight, are batched; a larger batch is split, so one call never blocks
   * Redis for long.
   */
  maxBatchSize?: number
}

/** Events a RedisStore emits (besides what its limiter reports per decision). */
export interface RedisStoreEvents {
  /**
   * Redis cannot be reached: a connection attempt failed or the connection was lost (or, on a
   * Cluster, the limiter's breaker of a master opened). Emitted once per outage of a shard; the
   * first one of a store also prints a process warning (code FLOODGATE_REDIS_UNAVAILABLE).
   * Decisions of the shard's keys meanwhile fail, and the limiter answers them with its
   * `onStoreError` mode. `shard` is the Cluster master (`host:port`), or `''` for the whole store
   * (standalone, Sentinel, or a client that lost its connections), as `shardOf` names them.
   */
  unavailable: [error: Error, shard: string]
  /** `shard` may answer again after an outage: reconnected, answered, or a Cluster's slot map changed. */
  available: [shard: string]
}

/**
 * The client of `options` (created, or the caller's), as a Connection. Throws INVALID_OPTION for
 * conflicting options or a client with a keyPrefix (closing a client it created).
 */
export function openClient(options: RedisStoreOptions): { client: RedisClientLike; connection: Connection; owned: boolean } {
  const { client, owned } = connect(options)
  const connection = toConnection(client)
  const keyPrefix = connection.keyPrefix()
  if (keyPrefix !== undefined) {
    if (owned) void connection.close().catch(nothing)
    throw invalidOption(
      'client',
      `the client has keyPrefix ${JSON.stringify(keyPrefix)}; remove it and pass { prefix } to RedisStore instead`,
    )
  }
  // Each failure already reaches the caller as a refused call (which the limiter turns into its
  // failure mode) and the store's 'unavailable' event; without a listener ioredis would print
  // every reconnection attempt, and node-redis would crash the process.
  if (owned) client.on('error', ignoreConnectionError)
  return { client, connection, owned }
}

function connect(options: RedisStoreOptions): { client: RedisClientLike; owned: boolean } {
  const given = (['client', 'url', 'cluster'] as const).filter((name) => options[name] !== undefined)
  if (given.length > 1) throw invalidOption(given.join(' and '), 'give only one of client, url or cluster')
  if (options.client !== undefined) {
    if (options.redis !== undefined || options.clusterOptions !== undefined) {
      throw invalidOption('client', 'redis and clusterOptions only apply to a client the store creates; configure your client instead')
    }
    return { client: options.client, owned: false }
  }
  if (options.redis !== undefined && (options.redis === null || typeof options.redis !== 'object')) {
    throw invalidOption('redis', 'expected an object of client options')
  }
  if (options.cluster !== undefined) {
    if (!Array.isArray(options.cluster) || options.cluster.length === 0) {
      throw invalidOption('cluster', "expected startup nodes like [{ host: '127.0.0.1', port: 7000 }]")
    }
    if (options.redis !== undefined) throw invalidOption('redis', 'for a cluster, pass node options as clusterOptions.redisOptions')
    return { client: createClient(options, 'cluster'), owned: true }
  }
  if (options.clusterOptions !== undefined) throw invalidOption('clusterOptions', 'only applies with cluster')
  if (options.url !== undefined) {
    if (typeof options.url !== 'string' || !/^rediss?:\/\//.test(options.url)) {
      throw invalidOption('url', `expected a redis:// or rediss:// URL, got ${JSON.stringify(options.url)}`)
    }
    return { client: createClient(options, 'url'), owned: true }
  }
  if (options.redis !== undefined) return { client: createClient(options, 'redis'), owned: true }
  throw invalidOption('options', "give one of client, url, redis or cluster, e.g. { url: 'redis://localhost:6379' }")
}

function ignoreConnectionError(): void {}

export function validateBatchSize(size: unknown): number {
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1) {
    throw invalidOption('maxBatchSize', `must be a whole number of at least 1, got ${JSON.stringify(size)}`)
  }
  return size
}

export function invalidOption(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `RedisStore ${field}: ${message}`)
}
