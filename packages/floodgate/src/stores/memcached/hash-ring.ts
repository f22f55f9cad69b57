// Consistent hashing of keys onto memcached servers (ketama's layout), so adding or removing a server moves only its share of keys.

import { createHash } from 'node:crypto'
import { routeOfRecord } from './keys.js'

/** Points per server on the ring: ketama's 160 (40 MD5 digests, 4 points each), enough for an even spread. */
const DIGESTS_PER_SERVER = 40

/**
 * A ketama-style ring: each server is hashed to 160 points on a 32-bit circle, and a key belongs to
 * the first point at or after its own hash. The same key always lands on the same server while the
 * list is the same (in any order), and removing one of n servers moves only about 1/n of the keys.
 * (The `hashring` package does the same with two unmaintained dependencies; memjs's own
 * `getServer` is a hash modulo the server count, which moves almost every key when the list changes.)
 */
export class HashRing {
  private readonly points: Uint32Array
  private readonly owners: Uint16Array

  /** `servers`: the names to hash (e.g. `host:port`), at least one, each once. */
  constructor(readonly servers: readonly string[]) {
    const entries: [number, number][] = []
    servers.forEach((server, index) => {
      for (let i = 0; i < DIGESTS_PER_SERVER; i++) {
        const digest = createHash('md5').update(`${server}-${i}`).digest()
        for (let part = 0; part < 4; part++) entries.push([digest.readUInt32LE(part * 4), index])
      }
    })
    // Ties (vanishingly rare) go to the server named first in sorted order, so list order never matters.
    entries.sort((a, b) => a[0] - b[0] || (servers[a[1]] < servers[b[1]] ? -1 : 1))
    this.points = Uint32Array.from(entries, (entry) => entry[0])
    this.owners = Uint16Array.from(entries, (entry) => entry[1])
  }

  /**
   * The index in `servers` of the server of a MemcachedStore record key: placed by its route (the
   * part before the first `|`, see keys.ts), so every record of one user key is on one server.
   * A memjs client of your own that shares keys with the store sets `getServer` to this.
   */
  serverOfRecord(recordKey: string): number {
    return this.serverOf(routeOfRecord(recordKey))
  }

  /** The index in `servers` of the server that holds `key`. */
  serverOf(key: string): number {
    if (this.servers.length === 1) return 0
    const hash = createHash('md5').update(key).digest().readUInt32LE(0)
    const points = this.points
    let low = 0
    let high = points.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (points[middle] < hash) low = middle + 1
      else high = middle
    }
    return this.owners[low === points.length ? 0 : low]
  }
}
