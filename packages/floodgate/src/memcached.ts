// The `floodgate/memcached` entry: the memcached store and its options. memjs is loaded only when the store creates its client.

export { MemcachedStore, type MemcachedStoreOptions } from './stores/memcached/memcached-store.js'
export type { MemjsClientLike, MemjsResponse } from './stores/memcached/protocol.js'
export type { CasStats } from './stores/memcached/policy-ops.js'
export { HashRing } from './stores/memcached/hash-ring.js'
export { memcachedPolicyKey, escapeMemcachedPart } from './stores/memcached/keys.js'
