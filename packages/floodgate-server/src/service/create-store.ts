// The service's store from its settings: embedded, memcached or Redis (one, a Cluster, Sentinels), wrapped for --compat-keys.

import { MemoryStore, type Store } from 'floodgate'
import { MemcachedStore } from 'floodgate/memcached'
import { jitteredExpiry } from './compat-expiry.js'
import { createUpstreamRedisCounter, EnvoyCompatStore } from './compat-keys.js'
import { createUpstreamMemcacheCounter } from './memcache-upstream-counter.js'
import { LazyRedisStore } from './lazy-redis-store.js'
import { type RedisErrorLog, storeConnectOptions, urlConnectOptions } from './redis-connection.js'
import type { Settings } from './settings.js'

/** `onCall` gets each Redis store call's duration in ms (the embedded store decides in-process: nothing to time). */
export function createStore(
  settings: Settings,
  onCall: (ms: number) => void,
  clock: (() => number) | undefined,
  onRedisError: RedisErrorLog,
): Store {
  const store = createOwnStore(settings, onCall, clock, onRedisError)
  if (settings.compatKeys !== 'envoy' || settings.store.kind === 'memory') return store
  const perSecond = settings.redisPerSecondUrl
  const expiry = jitteredExpiry(settings.compatExpiryJitterSeconds)
  const counter =
    settings.store.kind === 'memcached'
      ? createUpstreamMemcacheCounter(settings.store.servers, settings.store.tls, expiry, clock)
      : createUpstreamRedisCounter(
          storeConnectOptions(settings.store, settings.redisTls),
          perSecond === undefined ? undefined : urlConnectOptions(perSecond, settings.redisTls),
          onRedisError,
          expiry,
        )
  return new EnvoyCompatStore(store, counter, settings.compatPrefix)
}

function createOwnStore(
  settings: Settings,
  onCall: (ms: number) => void,
  clock: (() => number) | undefined,
  onRedisError: RedisErrorLog,
): Store {
  if (settings.store.kind === 'memory')
    return new MemoryStore({ maxKeys: settings.memoryMaxKeys, maxBytes: settings.memoryMaxBytes, ...(clock && { clock }) })
  // memjs is loaded only by the store's constructor, so the embedded mode never loads it.
  if (settings.store.kind === 'memcached')
    return new MemcachedStore({
      servers: settings.store.servers,
      prefix: settings.redisPrefix,
      ...(settings.store.tls && { tls: settings.store.tls }),
      ...(clock && { clock }),
    })
  // Loaded only when asked for, so the embedded mode never loads ioredis.
  const connect = storeConnectOptions(settings.store, settings.redisTls)
  return new LazyRedisStore(connect, settings.redisPrefix, onCall, settings.regions, onRedisError)
}
