// Lets a batch reach Redis only over a live connection, so no client queues a decision to apply it late.

import type { Connection, Unsubscribe } from './connection.js'
import { FloodgateError } from '../../core/errors.js'

/**
 * Clients keep commands given while disconnected and send them after reconnecting (ioredis always,
 * node-redis unless `disableOfflineQueue`). For a rate limiter that is wrong: by then the caller
 * has long been answered by its failure mode (fail open, closed or local), and the replayed script
 * would charge the key a second time. So:
 * - while the client is connected, batches pass at once;
 * - during its first connection attempt, batches wait for it (a store is usually used right after
 *   it is created), and are refused if that attempt fails; requests whose callers stopped waiting
 *   before a slow first connection succeeded are dropped then by the store (their deadline passed);
 * - after that attempt, whenever the client is not connected, batches are refused at once with
 *   STORE_UNAVAILABLE, which also spares the caller its timeout.
 * A Cluster client stays ready while one master fails over and retries on its own, so there
 * this guards only against the whole cluster being unreachable.
 */
export class ConnectionGate<T> {
  private held: T[][] = []
  /** The first connection attempt is over (it succeeded or failed). */
  private started: boolean
  private readonly unsubscribe: Unsubscribe[] = []

  constructor(
    private readonly connection: Connection,
    private readonly send: (items: T[]) => void,
    private readonly refuse: (items: T[], error: Error) => void,
  ) {
    this.started = connection.isReady()
    if (!this.started) this.unsubscribe.push(connection.onReady(this.onReady), connection.onDown(this.onFailedStart))
  }

  /** Sends `items` now, after the first connection, or refuses them (see the class comment). */
  pass(items: T[]): void {
    if (this.connection.isReady()) return this.send(items)
    if (this.started) return this.refuse(items, unavailable(this.connection.status()))
    this.held.push(items)
    // A lazyConnect (or never connected) client waits for a first command that the gate would never send.
    if (this.connection.isIdle()) this.connection.connect()
  }

  /** Stops listening to the client (it may outlive the store) and refuses what still waits. */
  detach(): void {
    this.stopListening()
    this.refuseHeld(unavailable('closed'))
  }

  private stopListening(): void {
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe()
  }

  private readonly onReady = (): void => {
    this.started = true
    this.stopListening()
    const held = this.held
    this.held = []
    for (const items of held) this.send(items)
  }

  private readonly onFailedStart = (): void => {
    this.started = true
    this.stopListening()
    this.refuseHeld(unavailable(this.connection.status()))
  }

  private refuseHeld(error: Error): void {
    const held = this.held
    this.held = []
    for (const items of held) this.refuse(items, error)
  }
}

/** The refusal of a batch that was not sent because the client is not connected. */
export function unavailable(status: string): FloodgateError {
  return new FloodgateError(
    'STORE_UNAVAILABLE',
    `Redis is not connected (client status: ${status}); the decision was not sent, so it cannot be applied later. ` +
      'Check that Redis is reachable; the limiter answers with its onStoreError mode meanwhile',
  )
}
