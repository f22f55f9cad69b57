// Creates the client of a RedisStore given { url }, { redis } or { cluster }: with the app's ioredis, else its node-redis.

import { createRequire } from 'node:module'
import { FloodgateError } from '../../core/errors.js'
import type { IoredisLike } from './ioredis-connection.js'
import type { NodeRedisClientLike, NodeRedisClusterLike } from './node-redis-connection.js'

/** A Redis Cluster startup node. */
export interface ClusterStartupNode {
  readonly host: string
  readonly port: number
}

/** What the store was asked to connect to (exactly one of the three). */
export interface CreateClientOptions {
  url?: string
  redis?: object
  cluster?: readonly ClusterStartupNode[]
  clusterOptions?: object
}

/** Loads a client library by name, or returns undefined when the app does not have it. */
export type LibraryLoader = (name: 'ioredis' | 'redis') => unknown

interface IoredisModule {
  Redis: new (...args: unknown[]) => IoredisLike
  Cluster: new (nodes: readonly ClusterStartupNode[], options: object) => IoredisLike
}

interface NodeRedisModule {
  createClient(options: object): NodeRedisClientLike
  createCluster(options: object): NodeRedisClusterLike
}

/**
 * Between reconnection attempts at most this long (ms), so that a Redis that answers again is
 * reached soon (ioredis waits up to 2 s by default, node-redis up to 0.5 s).
 */
export const RECONNECT_CAP_MS = 200

function reconnectDelay(attempt: number): number {
  return Math.min(attempt * 50, RECONNECT_CAP_MS)
}

/**
 * ioredis defaults for clients the store creates: a script sent just before a connection dropped
 * is not sent again after reconnecting, because its caller has been answered by then (the script
 * may or may not have run; charging at most once is the safe side for a limiter).
 */
const IOREDIS_DEFAULTS = { autoResendUnfulfilledCommands: false, retryStrategy: reconnectDelay }

/** The same for node-redis: no command waits in an offline queue for a later connection. */
const NODE_REDIS_DEFAULTS = { disableOfflineQueue: true }

// The app's copy: resolved from this package's folder, which in an installed app sees the app's node_modules.
const requireFromHere = createRequire(import.meta.url)

/** Loads `name` with the app's resolution, or undefined when it is not installed. */
export function loadInstalled(name: 'ioredis' | 'redis'): unknown {
  try {
    return requireFromHere(name)
  } catch (error) {
    if ((error as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes(`'${name}'`))
      return undefined
    throw error
  }
}

/**
 * Creates a client for `options` with ioredis when the app has it, else with node-redis, else
 * throws INVALID_OPTION saying what to install. `redis` and `clusterOptions` go to the library
 * that creates the client, with the store's defaults underneath.
 */
export function createClient(
  options: CreateClientOptions,
  field: string,
  load: LibraryLoader = loadInstalled,
): IoredisLike | NodeRedisClientLike | NodeRedisClusterLike {
  const ioredis = load('ioredis') as IoredisModule | undefined
  if (ioredis !== undefined) return createWithIoredis(ioredis, options)
  const redis = load('redis') as NodeRedisModule | undefined
  if (redis !== undefined) return createWithNodeRedis(redis, options, field)
  throw new FloodgateError(
    'INVALID_OPTION',
    `RedisStore ${field}: install a Redis client: npm i ioredis (or pass { client } made with the redis package)`,
  )
}

function createWithIoredis(ioredis: IoredisModule, options: CreateClientOptions): IoredisLike {
  if (options.cluster !== undefined) {
    const clusterOptions = options.clusterOptions as { redisOptions?: object } | undefined
    return new ioredis.Cluster(options.cluster, {
      clusterRetryStrategy: reconnectDelay,
      ...clusterOptions,
      redisOptions: { ...IOREDIS_DEFAULTS, ...clusterOptions?.redisOptions },
    })
  }
  if (options.url !== undefined) return new ioredis.Redis(options.url, { ...IOREDIS_DEFAULTS, ...options.redis })
  return new ioredis.Redis({ ...IOREDIS_DEFAULTS, ...options.redis })
}

function createWithNodeRedis(
  redis: NodeRedisModule,
  options: CreateClientOptions,
  field: string,
): NodeRedisClientLike | NodeRedisClusterLike {
  const socketDefaults = { reconnectStrategy: reconnectDelay }
  let client: NodeRedisClientLike | NodeRedisClusterLike
  if (options.cluster !== undefined) {
    const clusterOptions = (options.clusterOptions ?? {}) as { defaults?: { socket?: object } }
    client = redis.createCluster({
      ...clusterOptions,
      rootNodes: options.cluster.map(({ host, port }) => ({ socket: { host, port } })),
      defaults: { ...NODE_REDIS_DEFAULTS, ...clusterOptions.defaults, socket: { ...socketDefaults, ...clusterOptions.defaults?.socket } },
    })
  } else {
    const redisOptions = (options.redis ?? {}) as { sentinels?: unknown; socket?: object }
    if (redisOptions.sentinels !== undefined) {
      throw new FloodgateError('INVALID_OPTION', `RedisStore ${field}: Sentinel options need ioredis: npm i ioredis`)
    }
    client = redis.createClient({
      ...NODE_REDIS_DEFAULTS,
      ...redisOptions,
      ...(options.url === undefined ? {} : { url: options.url }),
      socket: { ...socketDefaults, ...redisOptions.socket },
    })
  }
  return client
}
