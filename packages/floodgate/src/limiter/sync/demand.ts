// Local demand of one key: an exponentially decaying rate of units (or decisions) per millisecond.

/**
 * A rate that follows what was asked recently: a steady stream settles at its rate within a few
 * `windowMs`, and a quiet key decays towards nothing. The caller passes the time (its injected
 * clock), so tests replay it exactly.
 */
export class Demand {
  private rate = 0
  private at = -Infinity

  constructor(private readonly windowMs: number) {}

  /** Records `units` asked at `now` and returns the rate (units per ms). */
  add(units: number, now: number): number {
    this.decay(now)
    this.rate = this.rate + units / this.windowMs
    return this.rate
  }

  /** The rate at `now` (units per ms), without recording anything. */
  perMs(now: number): number {
    this.decay(now)
    return this.rate
  }

  private decay(now: number): void {
    if (now > this.at) {
      // A stream of r units per ms adds r·dt/windowMs and keeps exp(-dt/windowMs): the fixed point is r.
      this.rate = this.at === -Infinity ? 0 : this.rate * Math.exp(-(now - this.at) / this.windowMs)
      this.at = now
    }
  }
}
