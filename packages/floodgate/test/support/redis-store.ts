// A throwaway redis-server for one test file (or one describe block): with an admin client
// (useRedis), or with a client and a RedisStore on that client (useRedisStore).

import { after, before } from 'node:test'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { startRedis, type RedisProcess } from './redis-server.js'

/** What `useRedis` makes; its fields exist only inside the tests of the scope that called it. */
export interface RedisFixture {
  /** The server: its url and port for the clients under test; pause/resume/pid to hang or kill it. */
  readonly server: RedisProcess
  /**
   * A client of the tests' own, to look at the server (records, INFO, FLUSHALL) and to CLIENT PAUSE
   * it. Its connection errors are swallowed, since tests take the server away under it; a command
   * that fails still rejects.
   */
  readonly admin: Redis
}

/**
 * Starts a redis-server (`args` passed through, e.g. an AOF) and an admin client before the tests of
 * the calling scope, and closes both after them (resuming the server first, if a test left it paused).
 */
export function useRedis(args: string[] = []): RedisFixture {
  let made: RedisFixture | undefined
  before(async () => {
    const server = await startRedis(args)
    const admin = new Redis(server.port, server.host)
    admin.on('error', () => {})
    made = { server, admin }
  })
  after(async () => {
    made?.admin.disconnect()
    await made?.server.stop()
  })
  const get = (): RedisFixture => {
    if (made === undefined) throw new Error('useRedis: the server and its admin client exist only inside tests')
    return made
  }
  return {
    get server() {
      return get().server
    },
    get admin() {
      return get().admin
    },
  }
}

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
