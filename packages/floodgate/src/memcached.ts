// The `floodgate/memcached` entry: the memcached store and its options. memjs is loaded only when the store creates its client.

export { MemcachedStore, type MemcachedStoreOptions } from './stores/memcached/memcached-store.js'
export { memjsTlsServers, type MemcachedTlsOptions } from './stores/memcached/tls-server.js'
export type { MemjsClientLike, MemjsResponse } from './stores/memcached/protocol.js'
export type { CasStats } from './stores/memcached/policy-ops.js'
// The ring the store places keys with: give your own memjs client's getServer the same, to share keys with stores made from `servers`.
export { HashRing } from './stores/memcached/hash-ring.js'
