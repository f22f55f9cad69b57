// Local demand of one key: an exponentially decaying rate of units (or decisions) per millisecond.

/**
 * A rate that follows what was asked recently: a steady stream settles at its rate within a few
 * `windowMs`, and a quiet key decays towards nothing. The caller passes the time (its injected
 * clock), so tests replay it exactly.
 */
export class Demand {
  private rate = 0
  private at = -Infinity
  // When the first units were asked, and how many: `estimate` reads the rate from what followed them.
  private firstAt = -Infinity
  private firstUnits = 0
  // A rate told by `seed` and when: `estimate` reads at least it, decaying, until what is counted here says more.
  private seedPerMs = 0
  private seedAt = 0

  constructor(private readonly windowMs: number) {}

  /** Records `units` asked at `now` and returns the rate (units per ms). */
  add(units: number, now: number): number {
    this.decay(now)
    if (this.firstAt === -Infinity) {
      this.firstAt = now
      this.firstUnits = units
    }
    this.rate = this.rate + units / this.windowMs
    return this.rate
  }

  /**
   * A rate read elsewhere (`auto`: a key turning hot brings the rate its heat was read at, as the
   * decisions it made cold were not counted here): `estimate` reads at least it, decaying as the
   * rate does, so that the first units asked are not read as a key asked once. It is a floor, not a
   * start: once the units counted here (read as `estimate` reads them) say more, they decide.
   */
  seed(perMs: number, now: number): void {
    this.seedPerMs = perMs
    this.seedAt = now
  }

  /** The rate at `now` (units per ms), without recording anything. */
  perMs(now: number): number {
    this.decay(now)
    return this.rate
  }

  /**
   * The rate at `now` (units per ms) read as soon as a key has been asked twice: the decaying rate
   * without the first units (they start the clock), divided by the share of a steady stream's rate
   * it has reached since then (1 − e^(−t/windowMs), as an exponential average's start-up bias is
   * corrected). A key asked every 20 ms reads 0.05/ms from its second request on, where `perMs`
   * takes a few windows to get there; a key asked once reads 0. The time since the first request
   * counts as at least a twentieth of the window, so two requests at once do not read as a flood.
   */
  estimate(now: number): number {
    const counted = this.counted(now)
    if (this.seedPerMs === 0) return counted
    return Math.max(counted, this.seedPerMs * Math.exp(-Math.max(0, now - this.seedAt) / this.windowMs))
  }

  private counted(now: number): number {
    this.decay(now)
    if (this.firstAt === -Infinity) return 0
    const since = now - this.firstAt
    const rest = this.rate - (this.firstUnits / this.windowMs) * Math.exp(-since / this.windowMs)
    if (rest <= 0) return 0
    return rest / (1 - Math.exp(-Math.max(since, this.windowMs / 20) / this.windowMs))
  }

  private decay(now: number): void {
    if (now > this.at) {
      // A stream of r units per ms adds r·dt/windowMs and keeps exp(-dt/windowMs): the fixed point is r.
      this.rate = this.at === -Infinity ? 0 : this.rate * Math.exp(-(now - this.at) / this.windowMs)
      this.at = now
    }
  }
}
