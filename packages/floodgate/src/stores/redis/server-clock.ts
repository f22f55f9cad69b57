// Maps a caller's deadline (performance.now() terms) to the Redis server's clock, learnt from the script's replies.

/**
 * How long (ms) the best offset sample is trusted before a worse one may replace it: the
 * server's clock may be stepped back (NTP), and a stale offset would then place deadlines too
 * late for that long.
 */
const OFFSET_TRUST_MS = 10_000

/**
 * Every reply of the script starts with the server's clock at the script's run. That run came at
 * most the reply's transit before the moment the reply is read here, so
 * `server clock − performance.now()` at reading is a lower bound of the offset between the two
 * clocks, whatever the skew between the machines. The best (largest) bound of the last
 * OFFSET_TRUST_MS is used: a deadline maps to a server time no later than the true one, so a call
 * its caller gave up on is never charged because of the mapping; at worst a call is refused that
 * much (a reply's transit, well under a millisecond on a LAN) early. A caller's deadline could
 * also be sent as a remaining budget, but the server cannot tell how long the call waited in
 * sockets and queues before it ran, which is the very delay to bound.
 */
export class ServerClock {
  // server clock − performance.now(), a lower bound, and when it was learnt.
  private offset: number | undefined
  private learntAt = 0

  /** Learns from a reply's server clock (ms), read at `at` (performance.now()). */
  learn(serverNow: number, at: number): void {
    const sample = serverNow - at
    if (this.offset === undefined || sample > this.offset || at - this.learntAt > OFFSET_TRUST_MS) {
      this.offset = sample
      this.learntAt = at
    }
  }

  /** Whether a reply has been read since the clock was created or last forgotten. */
  get known(): boolean {
    return this.offset !== undefined
  }

  /** Forgets what was learnt: the connection may now reach another server. */
  forget(): void {
    this.offset = undefined
  }

  /**
   * The earliest of `deadlines` (performance.now() values; undefined ones are skipped) on the
   * server's clock, rounded down (the server's clock is whole ms); undefined when there is none or
   * no reply has been read yet.
   */
  earliest<T>(items: readonly T[], deadlineOf: (item: T) => number | undefined): number | undefined {
    if (this.offset === undefined) return undefined
    let earliest = Infinity
    for (const item of items) {
      const deadline = deadlineOf(item)
      if (deadline !== undefined && deadline < earliest) earliest = deadline
    }
    return earliest === Infinity ? undefined : Math.floor(earliest + this.offset)
  }
}
