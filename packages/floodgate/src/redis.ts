// The `floodgate/redis` entry: the Redis store and its options, kept apart so ioredis loads only when used.

export { RedisStore, type RedisStoreOptions } from './stores/redis/redis-store.js'
export { policyKey, escapeKeyPart } from './stores/redis/keys.js'
