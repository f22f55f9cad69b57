// Regions for tests: a real redis-server per region, and a TCP proxy per link that adds latency and can partition.

import { createServer, connect, type Server, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import type { Policy, PolicyOptions } from '../../src/core/policy.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { RegionSync } from '../../src/regions/region-sync.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'

/** A TCP proxy in front of one Redis: every chunk is delayed by `latencyMs`; `partition()` drops the link. */
export interface LinkProxy {
  readonly url: string
  /** Closes every connection and refuses new ones until `heal()`, as a lost route does. */
  partition(): void
  heal(): void
  close(): Promise<void>
}

export async function startProxy(targetPort: number, latencyMs: number): Promise<LinkProxy> {
  const sockets = new Set<Socket>()
  let cut = false
  const server: Server = createServer((client) => {
    if (cut) {
      client.destroy()
      return
    }
    const upstream = connect(targetPort, '127.0.0.1')
    sockets.add(client).add(upstream)
    // Timers of one delay fire in the order they were set, so the byte stream keeps its order.
    const relay = (from: Socket, to: Socket) =>
      from.on('data', (chunk) => {
        setTimeout(() => {
          if (!cut && !to.destroyed) to.write(chunk)
        }, latencyMs)
      })
    relay(client, upstream)
    relay(upstream, client)
    const end = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    url: `redis://127.0.0.1:${port}`,
    partition() {
      cut = true
      for (const socket of sockets) socket.destroy()
      sockets.clear()
    },
    heal() {
      cut = false
    },
    async close() {
      cut = true
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** One region of a test: its Redis, store, sync (ticked by hand) and limiter. */
export interface TestRegion {
  readonly name: string
  readonly redis: RedisProcess
  readonly store: RedisStore
  readonly sync: RegionSync
  readonly limiter: RateLimiter
  /** A plain client on the region's Redis, for reading usage hashes. */
  readonly client: Redis
}

export interface TestRegions {
  readonly regions: TestRegion[]
  /** proxies[from][to]: the link `from` uses to reach `to`. */
  readonly proxies: Record<string, Record<string, LinkProxy>>
  /** Cuts (or heals) both directions between two regions. */
  partition(a: string, b: string): void
  heal(a: string, b: string): void
  /** Ticks until every region has exchanged with every peer (links connect in the background). */
  connected(): Promise<void>
  /** Ticks every region once, together. */
  tickAll(): Promise<void>
  stop(): Promise<void>
}

/** Never fires: the tests tick by hand. */
const MANUAL = { setTimeout: () => 0, clearTimeout: () => undefined }

/** Starts a region per name, linked through proxies of `latencyMs`, with the limiter's own policies. */
export async function startRegions(names: string[], policies: PolicyOptions[], clock: () => number, latencyMs = 50): Promise<TestRegions> {
  const servers = await Promise.all(names.map(() => startRedis()))
  const proxies: Record<string, Record<string, LinkProxy>> = {}
  for (const from of names) {
    proxies[from] = {}
    for (const [j, to] of names.entries()) if (to !== from) proxies[from][to] = await startProxy(servers[j].port, latencyMs)
  }
  const regions = names.map((name, i): TestRegion => {
    const store = new RedisStore({ url: servers[i].url })
    const peers = Object.fromEntries(Object.entries(proxies[name]).map(([to, proxy]) => [to, proxy.url]))
    const sync = new RegionSync({ region: name, local: store, peers, interval: '100ms', timeout: '2s', clock, timers: MANUAL })
    const limiter = new RateLimiter({ store: sync.store, policies, timeout: '5s', clock })
    return { name, redis: servers[i], store, sync, limiter, client: new Redis(servers[i].url) }
  })
  const net: TestRegions = {
    regions,
    proxies,
    partition(a, b) {
      proxies[a][b].partition()
      proxies[b][a].partition()
    },
    heal(a, b) {
      proxies[a][b].heal()
      proxies[b][a].heal()
    },
    async tickAll() {
      await Promise.all(regions.map((region) => region.sync.tick()))
    },
    async stop() {
      for (const region of regions) {
        await region.sync.close()
        await region.limiter.close()
        await region.store.close()
        region.client.disconnect()
      }
      for (const links of Object.values(proxies)) for (const proxy of Object.values(links)) await proxy.close()
      await Promise.all(servers.map((server) => server.stop()))
    },
    async connected() {
      for (let i = 0; i < 200; i++) {
        await net.tickAll()
        if (regions.every((region) => region.sync.status().peers.every((peer) => peer.connected))) return
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      throw new Error('the regions did not connect to each other')
    },
  }
  await net.connected()
  return net
}

/** Fires `count` decisions of `key` at once in a region; resolves to how many were admitted. */
export async function burst(region: TestRegion, key: string, count: number, policies?: readonly Policy[]): Promise<number> {
  const decisions = await Promise.all(Array.from({ length: count }, () => region.limiter.limit(key, { policies })))
  return decisions.filter((decision) => decision.allowed).length
}

/** The shared fields (u|, d|, g|) of one usage hash in a region's Redis. */
export async function usageFields(region: TestRegion, hashKey: string): Promise<Record<string, number>> {
  const all = await region.client.hgetall(hashKey)
  return Object.fromEntries(
    Object.entries(all)
      .filter(([field]) => /^[udg]\|/.test(field))
      .map(([field, value]) => [field, Number(value)]),
  )
}
