// The slowest recent answer of a store: what an adaptive timeout scales its deadline from.

/**
 * The longest latency seen over the last one to two `horizonMs` (two buckets: the one being filled
 * and the one before). A maximum, not a percentile: the deadline exists to tell a dead store from a
 * slow one, and the answers that matter are exactly the slow ones a percentile would discard. The
 * horizon lets a past spike fall out, so a store that recovered gets a shorter deadline again.
 * One comparison per sample; no allocation.
 */
export class LatencyPeak {
  private current = 0
  private previous = 0
  private bucketStart: number

  constructor(
    private readonly horizonMs: number,
    now: number,
  ) {
    this.bucketStart = now
  }

  /** Records one answered call's latency (`ms`), answered at `now` (the same monotonic clock). */
  record(ms: number, now: number): void {
    this.rotate(now)
    if (ms > this.current) this.current = ms
  }

  /** The longest latency of the last one to two horizons (0: none seen). */
  peak(now: number): number {
    this.rotate(now)
    return this.current > this.previous ? this.current : this.previous
  }

  private rotate(now: number): void {
    const age = now - this.bucketStart
    if (age < this.horizonMs) return
    // A gap of two horizons or more with no sample leaves nothing recent: both buckets start empty.
    this.previous = age < 2 * this.horizonMs ? this.current : 0
    this.current = 0
    this.bucketStart = now
  }
}
