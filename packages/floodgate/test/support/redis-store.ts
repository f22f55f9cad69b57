// A throwaway redis-server with an ioredis client and a RedisStore on that client, for one test file.

import { after, before } from 'node:test'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { startRedis, type RedisProcess } from './redis-server.js'

/** What `useRedisStore` makes; its fields exist only inside the file's tests. */
export interface RedisStoreFixture {
  readonly server: RedisProcess
  /** The store's client, also for looking at the server (records, FLUSHDB, CONFIG). */
  readonly client: Redis
  readonly store: RedisStore
}

/** Starts a redis-server, a client and a store before the file's tests, and closes them after. */
export function useRedisStore(): RedisStoreFixture {
  let made: RedisStoreFixture | undefined
  before(async () => {
    const server = await startRedis()
    const client = new Redis(server.port, server.host)
    made = { server, client, store: new RedisStore({ client }) }
  })
  after(async () => {
    await made?.store.close()
    made?.client.disconnect()
    await made?.server.stop()
  })
  const get = (): RedisStoreFixture => {
    if (made === undefined) throw new Error('useRedisStore: the server and store exist only inside tests')
    return made
  }
  return {
    get server() {
      return get().server
    },
    get client() {
      return get().client
    },
    get store() {
      return get().store
    },
  }
}
