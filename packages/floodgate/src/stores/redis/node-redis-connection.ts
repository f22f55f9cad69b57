// The Connection adapter for node-redis (the `redis` package): createClient() and createCluster(), recognised by shape.

import type { Connection, ScriptArgument, Unsubscribe } from './connection.js'
import { slotMapSignature } from './ioredis-connection.js'

/**
 * node-redis command options asking for every bulk string as a Buffer: the `typeMapping` of
 * RESP's blob string (`$`, code 36, RESP_TYPES.BLOB_STRING), so the script's binary reply is not
 * decoded as UTF-8 text.
 */
const BUFFER_REPLY = { typeMapping: { 36: Buffer } }

interface NodeRedisCommon {
  /** Connected and the handshake done. */
  readonly isReady: boolean
  /** `connect()` was called and neither `close()` nor `destroy()` since (it may be reconnecting). */
  readonly isOpen: boolean
  connect(): Promise<unknown>
  close(): Promise<unknown>
  destroy(): unknown
  on(event: string, listener: (...args: unknown[]) => void): unknown
  off(event: string, listener: (...args: unknown[]) => void): unknown
}

/** The part of a node-redis client (`createClient()`, `redis` 5 or later) that RedisStore uses. */
export interface NodeRedisClientLike extends NodeRedisCommon {
  sendCommand(args: ScriptArgument[], options?: { typeMapping?: object }): Promise<unknown>
}

/** The part of a node-redis cluster (`createCluster()`, `redis` 5 or later) that RedisStore uses. */
export interface NodeRedisClusterLike extends NodeRedisCommon {
  /** Each slot's shard; its master's address is `host:port`. */
  readonly slots: ReadonlyArray<{ readonly master: { readonly address: string } } | undefined>
  /** node-redis's slot map keeper (underscored, but typed and public); `rediscover` reads the map again. */
  readonly _slots?: { rediscover?(startWith?: undefined): Promise<unknown> }
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: ScriptArgument[],
    options?: { typeMapping?: object },
  ): Promise<unknown>
}

/** A client from the `redis` package. */
export type NodeRedisLike = NodeRedisClientLike | NodeRedisClusterLike

export function isNodeRedis(client: unknown): client is NodeRedisLike {
  if (client === null || typeof client !== 'object') return false
  const candidate = client as Record<string, unknown>
  return typeof candidate.sendCommand === 'function' && typeof candidate.isReady === 'boolean' && typeof candidate.isOpen === 'boolean'
}

function isNodeRedisCluster(client: NodeRedisLike): client is NodeRedisClusterLike {
  return Array.isArray((client as { slots?: unknown }).slots) && typeof (client as { masters?: unknown }).masters === 'object'
}

export function nodeRedisConnection(client: NodeRedisLike): Connection {
  const listen = (event: string, listener: (...args: unknown[]) => void): Unsubscribe => {
    client.on(event, listener)
    return () => client.off(event, listener)
  }
  const cluster = isNodeRedisCluster(client) ? client : undefined
  const standalone = cluster === undefined ? (client as NodeRedisClientLike) : undefined
  // node-redis queues every command and writes the queue from setImmediate: a call goes out in the
  // check phase of the same loop turn, not at once as with ioredis.
  const send = (args: ScriptArgument[], routingKey: string | undefined): Promise<unknown> =>
    cluster !== undefined ? cluster.sendCommand(routingKey, false, args, BUFFER_REPLY) : standalone!.sendCommand(args, BUFFER_REPLY)
  return {
    client,
    library: 'redis',
    isCluster: cluster !== undefined,
    isReady: () => client.isReady,
    status: () => (client.isReady ? 'ready' : client.isOpen ? 'reconnecting' : 'closed'),
    isIdle: () => !client.isOpen,
    connect: () => void client.connect().catch(ignore),
    // A client says 'ready'; a cluster says 'connect' once it knows its slots and reached them.
    onReady: (listener) => listen(cluster === undefined ? 'ready' : 'connect', listener),
    // node-redis emits a socket's failures as 'error' (and crashes the process if nobody listens).
    onDown: (listener) => listen('error', (error: unknown) => listener(error instanceof Error ? error : undefined)),
    // node-redis itself rejects every command in flight on a socket that closes.
    onLost: () => ignore,
    evalBuffer: (command, script, keys, args) => send([command, script, String(keys.length), ...keys, ...args], keys[0]),
    masterOf: (slot) => cluster?.slots[slot]?.master.address,
    // node-redis also reads the slot map again by itself on MOVED and after a node's reconnection
    // attempts; asking sooner is what brings the limiter back right after a failover.
    refreshSlots:
      typeof cluster?._slots?.rediscover === 'function' ? () => cluster._slots!.rediscover!(undefined).then(ignore, ignore) : undefined,
    slotMapSignature: () => slotMapSignature((slot) => cluster?.slots[slot]?.master.address),
    del: (keys) => send(['DEL', ...keys], keys[0]),
    keyPrefix: () => {
      const prefix = (client as { _keyPrefix?: unknown })._keyPrefix
      return prefix === undefined || prefix === null || String(prefix) === '' ? undefined : String(prefix)
    },
    close: async () => {
      if (!client.isOpen) return
      // close() lets replies in flight arrive first; a client that is not connected is dropped.
      if (client.isReady) await client.close().catch(() => client.destroy())
      else client.destroy()
    },
  }
}

function ignore(): void {}
