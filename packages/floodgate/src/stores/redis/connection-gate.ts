// Lets a batch reach Redis only over a live connection, so ioredis never queues a decision to apply it late.

import type { Cluster, Redis } from 'ioredis'
import { FloodgateError } from '../../core/errors.js'

/**
 * ioredis keeps commands given to a disconnected client and sends them after reconnecting. For a
 * rate limiter that is wrong: by then the caller has long been answered by its failure mode (fail
 * open, closed or local), and the replayed script would charge the key a second time. So:
 * - while the client is connected, batches pass at once;
 * - during its first connection attempt, batches wait for it (a store is usually used right after
 *   it is created), and are refused if that attempt fails; a caller that stopped waiting before a
 *   slow first connection succeeded is still charged then, once;
 * - after that attempt, whenever the client is not connected, batches are refused at once with
 *   STORE_UNAVAILABLE, which also spares the caller its timeout.
 * A Cluster client stays `ready` while one master fails over and retries on its own, so there
 * this guards only against the whole cluster being unreachable.
 */
export class ConnectionGate<T> {
  private held: T[][] = []
  /** The first connection attempt is over (it succeeded or failed). */
  private started: boolean

  constructor(
    private readonly client: Redis | Cluster,
    private readonly send: (items: T[]) => void,
    private readonly refuse: (items: T[], error: Error) => void,
  ) {
    this.started = client.status === 'ready'
    if (!this.started) {
      client.once('ready', this.onReady)
      client.on('close', this.onFailedStart)
    }
  }

  /** Sends `items` now, after the first connection, or refuses them (see the class comment). */
  pass(items: T[]): void {
    if (this.client.status === 'ready') return this.send(items)
    if (this.started) return this.refuse(items, unavailable(this.client.status))
    this.held.push(items)
    // A lazyConnect client waits for a first command that the gate would never send.
    if (this.client.status === 'wait') this.client.connect().catch(() => undefined)
  }

  /** Stops listening to the client (it may outlive the store) and refuses what still waits. */
  detach(): void {
    this.client.removeListener('ready', this.onReady)
    this.client.removeListener('close', this.onFailedStart)
    this.refuseHeld(unavailable('closed'))
  }

  private readonly onReady = (): void => {
    this.started = true
    this.client.removeListener('close', this.onFailedStart)
    const held = this.held
    this.held = []
    for (const items of held) this.send(items)
  }

  private readonly onFailedStart = (): void => {
    this.started = true
    this.client.removeListener('ready', this.onReady)
    this.client.removeListener('close', this.onFailedStart)
    this.refuseHeld(unavailable(this.client.status))
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
