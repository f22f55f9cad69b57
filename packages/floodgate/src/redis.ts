// The `floodgate/redis` entry: the Redis store and its options. No Redis client library is loaded
// here; the store uses the client you pass, or loads the app's ioredis (else node-redis) to create one.

export { RedisStore, type RedisStoreEvents, type RedisStoreOptions } from './stores/redis/redis-store.js'
export type { IoredisLike, NodeRedisLike, RedisClientLike } from './stores/redis/connection.js'
export type { ClusterStartupNode } from './stores/redis/create-client.js'
