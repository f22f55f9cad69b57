// What RedisStore needs of a Redis client, and the client families it accepts (by shape, never by instanceof).

import { FloodgateError } from '../../core/errors.js'
import { ioredisConnection, isIoredis, type IoredisLike } from './ioredis-connection.js'
import { isNodeRedis, nodeRedisConnection, type NodeRedisLike } from './node-redis-connection.js'

export type { IoredisLike } from './ioredis-connection.js'
export type { NodeRedisLike } from './node-redis-connection.js'

/**
 * A client RedisStore can use: an ioredis (5 or 6) `Redis` or `Cluster`, or a node-redis client
 * from the `redis` package (`createClient()` or `createCluster()`). Recognised by the methods the
 * store calls, so a client made by any installed copy of either library works.
 */
export type RedisClientLike = IoredisLike | NodeRedisLike

/** Removes a listener added with one of Connection's `on…` methods. */
export type Unsubscribe = () => void

/**
 * One client, as the store sees it. Each client family has one adapter; the store, the gate and
 * the script runner only ever talk to this.
 */
/** An argument of a script call: text, or bytes. */
export type ScriptArgument = string | Buffer

export interface Connection {
  /** The client the adapter wraps (given to the store, or created by it). */
  readonly client: RedisClientLike
  /** Which library made the client, for messages. */
  readonly library: 'ioredis' | 'redis'
  readonly isCluster: boolean
  /** Commands written now reach the server (connected, handshake done). */
  isReady(): boolean
  /** The client's own word for its state, for messages (e.g. `reconnecting`). */
  status(): string
  /** Not connected and not trying (a lazyConnect or never-connected client): no command can go before `connect()`. */
  isIdle(): boolean
  /** Starts connecting a client that is idle; failures arrive through `onDown`. */
  connect(): void
  /** Calls `listener` each time the client becomes ready. */
  onReady(listener: () => void): Unsubscribe
  /** Calls `listener` when a connection attempt fails or an established connection is lost. */
  onDown(listener: (error?: Error) => void): Unsubscribe
  /**
   * Standalone/Sentinel only: calls `listener` when the connection closes with commands in flight
   * that the client will never settle (ioredis without `autoResendUnfulfilledCommands`).
   */
  onLost(listener: () => void): Unsubscribe
  /**
   * Sends EVALSHA or EVAL with a Buffer reply, written to the socket at once where the client
   * allows it (see scripts.ts). On a Cluster it goes to the master of `keys[0]`'s slot. An argument
   * may be binary (a Buffer: the lease and merge calls' numbers, which Lua unpacks cheaper than text).
   */
  evalBuffer(command: 'evalsha' | 'eval', script: string, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown>
  /** Cluster: the address of the master serving `slot` as the client last saw it; undefined if unknown. */
  masterOf(slot: number): string | undefined
  /**
   * Cluster: asks the client to read the slot map again now, and resolves when it has (never
   * rejects). Undefined when the client offers no way to do so (it then refreshes on MOVED by itself).
   */
  readonly refreshSlots: (() => Promise<void>) | undefined
  /** A signature of the slot map (masters by slot), to tell whether a refresh changed it. */
  slotMapSignature(): string
  /** Deletes keys that all share one slot. */
  del(keys: readonly string[]): Promise<unknown>
  /** The client's `keyPrefix`, if it has one (the store refuses it). */
  keyPrefix(): string | undefined
  /** Ends the client: politely (replies in flight arrive first) when connected, at once otherwise. */
  close(): Promise<void>
}

/** Wraps `client` in its family's adapter, or throws INVALID_OPTION naming what was expected. */
export function toConnection(client: unknown): Connection {
  if (isIoredis(client)) return ioredisConnection(client)
  if (isNodeRedis(client)) return nodeRedisConnection(client)
  throw new FloodgateError(
    'INVALID_OPTION',
    'RedisStore client: expected an ioredis Redis or Cluster, or a client from the redis package (createClient or createCluster); ' +
      `got ${describe(client)}`,
  )
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value !== 'object') return typeof value
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== '' ? `an object of class ${name}` : 'an object without the methods of either'
}
