// Tells when a RedisStore's Redis stops answering and when it may answer again, and on a Cluster finds the new master.

import { FloodgateError } from '../../core/errors.js'
import type { Connection } from './connection.js'

/** How often (ms) a Cluster's slot map is read again while the store waits for a failover. */
const SLOT_REFRESH_MS = 250

/** What an Outage announces: `unavailable` once per outage, `available` at its end. */
export interface OutageListener {
  unavailable(error: Error): void
  available(): void
}

/**
 * Down: a connection attempt failed, the connection was lost, or (Cluster) the limiter reported
 * failures. Up: the client is ready again, a call succeeded, or a Cluster's slot map changed. The
 * first outage of a store also prints a process warning (FLOODGATE_REDIS_UNAVAILABLE): a store
 * created from a URL that cannot connect would otherwise fail open without a word.
 */
export class Outage {
  private down = false
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
    )
  }

  /** The client is ready (again). */
  readonly connectionReady = (): void => this.markUp()

  /** A script call answered: cheap unless an outage is on, or a Cluster's slot map was never read. */
  answered(): void {
    if (this.down || this.slotRefresh !== undefined) {
      if (this.connection.isCluster) this.trustedSlotMap = this.connection.slotMapSignature()
      this.markUp()
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
  recover(): void {
    const refresh = this.connection.refreshSlots
    if (refresh === undefined) {
      // A server that hangs (stopped, paused, overloaded) keeps its connection: the outage ends
      // with the first answer to a call still in flight, which `answered` announces.
      this.markDown(new FloodgateError('STORE_UNAVAILABLE', 'Redis is not answering in time (calls time out or fail)'))
      return
    }
    if (this.slotRefresh !== undefined) return
    this.markDown(
      new FloodgateError(
        'STORE_UNAVAILABLE',
        'calls to the Redis Cluster are failing; the store reads the slot map again until a replica takes over',
      ),
    )
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
        this.markUp()
      }, nothing)
    }
    this.slotRefresh = setTimeout(check, 0).unref()
  }

  /** Stops reading the slot map (the store is closing). */
  stop(): void {
    clearTimeout(this.slotRefresh)
    this.slotRefresh = undefined
  }

  private markDown(error: Error): void {
    if (this.down) return
    this.down = true
    if (!this.warned) {
      this.warned = true
      process.emitWarning(
        `RedisStore ${error.message}. Decisions are answered by the limiter's onStoreError mode until it answers; ` +
          "listen to the store's 'unavailable' event to handle this yourself",
        { code: 'FLOODGATE_REDIS_UNAVAILABLE' },
      )
    }
    this.listener.unavailable(error)
  }

  private markUp(): void {
    this.stop()
    if (!this.down) return
    this.down = false
    this.listener.available()
  }
}

function nothing(): void {}
