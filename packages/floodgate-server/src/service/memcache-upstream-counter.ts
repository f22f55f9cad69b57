// envoyproxy/ratelimit's memcache counters for --compat-keys envoy: placed as upstream's client places them, over TLS
// with --memcache-tls, and moved to a new server list when MEMCACHE_SRV_REFRESH finds one (as upstream's client is).

import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import { FloodgateError } from 'floodgate'
import { memjsTlsServers, type MemcachedTlsOptions } from 'floodgate/memcached'
import { type CounterExpiry, memcachedExpiry } from './compat-expiry.js'
import type { UpstreamCounter } from './compat-keys.js'

/** A memjs client, as far as the memcache counter uses it. */
export interface MemjsCounterClient {
  increment(key: string, amount: number, options: { initial: number; expires: number }): Promise<{ success: boolean; value: number | null }>
  decrement(key: string, amount: number, options: object): Promise<{ success: boolean; value: number | null }>
  get(key: string): Promise<{ value: Buffer | null }>
  getServer(key: string): number
  readonly servers: readonly unknown[]
  close(): void
}

/** One server list's client, and the calls still running on it (it is closed after the last, once replaced). */
interface Slot {
  client: MemjsCounterClient
  calls: number
}

/**
 * Upstream's memcache counting (src/memcached/cache_impl.go): `incr key hits`, and when the key is
 * missing `add key hits` with the unit's seconds (plus jitter) as expiry (then `incr` again if another instance
 * added it first). The binary protocol's `incr` with an initial value and expiry does all of that in
 * one atomic step, leaving the same value and expiry. Keys go to the server upstream's client
 * (gomemcache's ServerList) picks: CRC-32 (IEEE) of the key modulo the number of servers, in
 * MEMCACHE_HOST_PORT order (or the SRV record's sorted order), so both fleets find a counter on the
 * same server. `connect` makes the client of a new list (setServers), as upstream's SRV refresh
 * gives its client the new list.
 */
export class MemcacheUpstreamCounter implements UpstreamCounter {
  private slot: Slot

  constructor(
    client: MemjsCounterClient,
    private readonly connect?: (servers: readonly string[]) => MemjsCounterClient,
    private readonly expiry: CounterExpiry = (unitSeconds) => unitSeconds,
    private readonly clock: () => number = Date.now,
  ) {
    this.slot = { client: placeAsUpstream(client), calls: 0 }
  }

  /**
   * Counts from now on on `servers` (in upstream's order), placed by their count. Calls already
   * running end on the old list, whose connections are closed after the last of them.
   */
  setServers(servers: readonly string[]): void {
    if (this.connect === undefined) throw new FloodgateError('INVALID_OPTION', 'this counter was made for a fixed server list')
    const old = this.slot
    this.slot = { client: placeAsUpstream(this.connect(servers)), calls: 0 }
    if (old.calls === 0) old.client.close()
  }

  /** gomemcache's `legalKey`: at most 250 bytes, nothing at or below space, no DEL. */
  accepts(key: string): boolean {
    return Buffer.byteLength(key) <= 250 && !/[\x00-\x20\x7f]/.test(key)
  }

  async count(key: string, hits: number, unitSeconds: number): Promise<number> {
    const slot = this.slot
    slot.calls++
    try {
      return await countOn(slot.client, key, hits, memcachedExpiry(this.expiry(unitSeconds), this.clock()))
    } finally {
      if (--slot.calls === 0 && slot !== this.slot) slot.client.close()
    }
  }

  async close(): Promise<void> {
    this.slot.client.close()
  }
}

function placeAsUpstream(client: MemjsCounterClient): MemjsCounterClient {
  const count = client.servers.length
  client.getServer = (key: string) => (count === 1 ? 0 : crc32(key) % count)
  return client
}

async function countOn(client: MemjsCounterClient, key: string, hits: number, expires: number): Promise<number> {
  if (hits === 0) {
    const { value } = await client.get(key)
    return value === null ? 0 : Number(value.toString('latin1').trim()) || 0
  }
  // Upstream never takes hits back; a refund (which its decider does not send) comes off the count.
  const { value } = hits > 0 ? await increment(client, key, hits, expires) : await client.decrement(key, -hits, {})
  if (value === null) throw new FloodgateError('STORE_UNAVAILABLE', `memcached did not count ${JSON.stringify(key)}`)
  return value
}

// Two first increments at once: memcached creates the key for one and answers the other "not
// stored" (upstream's add fails the same way and it increments again); the next try counts.
async function increment(client: MemjsCounterClient, key: string, hits: number, expires: number): Promise<{ value: number | null }> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await client.increment(key, hits, { initial: hits, expires })
    } catch (error) {
      if (attempt >= 3 || !/not stored/i.test(String(error))) throw error
    }
  }
}

/**
 * A counter on upstream's memcache servers (`host:port` each), with the app's memjs; over TLS with
 * `tls` (the same servers in the same order, each memjs Server's TLS twin, so placement holds).
 */
export function createUpstreamMemcacheCounter(
  servers: readonly string[],
  tls?: MemcachedTlsOptions,
  expiry?: CounterExpiry,
  clock?: () => number,
): MemcacheUpstreamCounter {
  const memjs = createRequire(import.meta.url)('memjs') as MemjsForCounter
  const options = { retries: 1, timeout: 0.5, logger: { log: () => {} } }
  const toTls = tls === undefined ? undefined : memjsTlsServers(memjs, tls)
  const connect = (list: readonly string[]) => {
    const plain = memjs.Client.create(list.join(','), options)
    return toTls === undefined ? plain : new memjs.Client(plain.servers.map(toTls), options)
  }
  return new MemcacheUpstreamCounter(connect(servers), connect, expiry, clock)
}

interface MemjsForCounter {
  Server: unknown
  Client: { create(servers: string, options: object): MemjsCounterClient; new (servers: unknown[], options: object): MemjsCounterClient }
}
