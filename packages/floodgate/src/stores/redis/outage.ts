// Tells when a RedisStore's Redis (or one Cluster master) stops answering and when it may answer
// again, and on a Cluster finds the new master.

import { FloodgateError } from '../../core/errors.js'
import type { Connection } from './connection.js'

/** How often (ms) a Cluster's slot map is read again while the store waits for a failover. */
const SLOT_REFRESH_MS = 250

/**
 * What an Outage announces: `unavailable` once per outage of a shard, `available` at its end. The
 * shard is a Cluster master's address, or `''` for the whole store (standalone, Sentinel, or a
 * Cluster client that lost every connection).
 */
export interface OutageListener {
  unavailable(error: Error, shard: string): void
  available(shard: string): void
}

/** The whole store, as a shard name (see Store.shardOf). */
const WHOLE = ''

/**
 * Down: a connection attempt failed, the connection was lost (the whole store), or the limiter
 * reported failures while a shard's breaker is open (that shard). Up: the client is ready again
 * (every shard), a call to the shard succeeded, or a Cluster's slot map changed (every shard down:
 * a replica took over, and the failed master's keys now go to it). The
 * first outage of a store also prints a process warning (FLOODGATE_REDIS_UNAVAILABLE): a store
 * created from a URL that cannot connect would otherwise fail open without a word.
 */
export class Outage {
  // The shards in an outage now (WHOLE for all of them); a handful at most: one per master.
  private readonly down = new Set<string>()
  private warned = false
  private slotRefresh: NodeJS.Timeout | undefined
  // Cluster: the slot map (slotMapSignature) calls last succeeded with; read after outages only.
  private trustedSlotMap: string | undefined

  constructor(
    private readonly connection: Connection,
    private readonly listener: OutageListener,
  ) {}

  /** A connection attempt failed or the connection was lost. */
  readonly connectionDown = (error?: Error): void => {
    // Status 'end' without an error: the client's owner closed it (quit, disconnect), as a service
    // does on its way down. That is a shutdown, not an outage: no warning. Should decisions still
    // come, each is refused with STORE_UNAVAILABLE, and the limiter's breaker reports the outage.
    if (error === undefined && this.connection.status() === 'end') return
    const because = error === undefined ? '' : `: ${error.message}`
    this.markDown(
      new FloodgateError(
        'STORE_UNAVAILABLE',
        `cannot reach Redis (${this.connection.library} client status: ${this.connection.status()})${because}`,
      ),
      WHOLE,
    )
  }

  /** The client is ready (again): every shard may answer. */
  readonly connectionReady = (): void => this.markAllUp()

  /**
   * A script call to `shard` answered: cheap unless an outage is on, or a Cluster's slot map was
   * never read. Ends that shard's outage (and the whole store's), not another shard's: a healthy
   * master answering says nothing about a dead one.
   */
  answered(shard: string): void {
    if (this.down.size > 0) {
      if (!this.down.has(shard) && !this.down.has(WHOLE)) return
      this.markUp(WHOLE)
      this.markUp(shard)
      if (this.down.size === 0 && this.connection.isCluster) this.trustedSlotMap = this.connection.slotMapSignature()
    } else if (this.trustedSlotMap === undefined && this.connection.isCluster) {
      this.trustedSlotMap = this.connection.slotMapSignature()
    }
  }

  /**
   * Calls fail while the caller's breaker is open: an outage, which the next answer ends. On a
   * Cluster whose client can be asked to, the
   * slot map is read again every SLOT_REFRESH_MS until it differs from the one calls last
   * succeeded with (a replica took over), which ends the outage: the limiter's next call then
   * goes to the new master instead of waiting out its cooldown on the old map. Calling it again
   * while it reads does nothing.
   */
  recover(shard: string): void {
    const refresh = this.connection.refreshSlots
    if (refresh === undefined) {
      // A server that hangs (stopped, paused, overloaded) keeps its connection: the outage ends
      // with the first answer to a call still in flight, which `answered` announces.
      this.markDown(new FloodgateError('STORE_UNAVAILABLE', 'Redis is not answering in time (calls time out or fail)'), shard)
      return
    }
    const where = shard === WHOLE ? 'the Redis Cluster' : `the Redis Cluster master ${shard}`
    this.markDown(
      new FloodgateError(
        'STORE_UNAVAILABLE',
        `calls to ${where} are failing; the store reads the slot map again until a replica takes over`,
      ),
      shard,
    )
    if (this.slotRefresh !== undefined) return
    const before = this.trustedSlotMap ?? this.connection.slotMapSignature()
    const check = (): void => {
      refresh().then(() => {
        if (this.slotRefresh === undefined) return
        const now = this.connection.slotMapSignature()
        if (now === before) {
          this.slotRefresh = setTimeout(check, SLOT_REFRESH_MS).unref()
          return
        }
        // The next failure waits for a change from this map, not the old one again.
        this.trustedSlotMap = now
        this.markAllUp()
      }, nothing)
    }
    this.slotRefresh = setTimeout(check, 0).unref()
  }

  /** Stops reading the slot map (the store is closing). */
  stop(): void {
    clearTimeout(this.slotRefresh)
    this.slotRefresh = undefined
  }

  private markDown(error: Error, shard: string): void {
    if (this.down.has(shard)) return
    this.down.add(shard)
    if (!this.warned) {
      this.warned = true
      process.emitWarning(
        `RedisStore ${error.message}. Decisions are answered by the limiter's onStoreError mode until it answers; ` +
          "listen to the store's 'unavailable' event to handle this yourself",
        { code: 'FLOODGATE_REDIS_UNAVAILABLE' },
      )
    }
    this.listener.unavailable(error, shard)
  }

  private markUp(shard: string): void {
    if (!this.down.delete(shard)) return
    if (this.down.size === 0) this.stop()
    this.listener.available(shard)
  }

  private markAllUp(): void {
    this.stop()
    for (const shard of [...this.down]) this.markUp(shard)
  }
}

function nothing(): void {}
