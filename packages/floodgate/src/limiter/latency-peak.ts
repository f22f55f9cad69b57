// The slowest recent answer of a store: what an adaptive timeout scales its deadline from.

/**
 * The longest latency of the last one to two `horizonMs` that had answers (two buckets: the one
 * being filled and the last one before it with a sample). A maximum, not a percentile: the
 * deadline exists to tell a dead store from a slow one, and the answers that matter are exactly
 * the slow ones a percentile would discard. Newer answers push a past spike out, so a store that
 * recovered gets a shorter deadline again; time alone does not (a quiet store is no faster).
 * One comparison per sample; no allocation.
 */
export class LatencyPeak {
  private current = 0
  private previous = 0
  private any = false
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
    this.any = true
    if (ms > this.current) this.current = ms
  }

  /** Whether any latency was recorded yet. */
  get seen(): boolean {
    return this.any
  }

  /** The longest latency of the last one to two horizons with answers (0: none seen). */
  peak(now: number): number {
    this.rotate(now)
    return Math.max(this.current, this.previous)
  }

  private rotate(now: number): void {
    if (now - this.bucketStart < this.horizonMs) return
    // An empty bucket is no evidence that the store got faster: the last one with answers stays.
    if (this.current > 0) this.previous = this.current
    this.current = 0
    this.bucketStart = now
  }
}
