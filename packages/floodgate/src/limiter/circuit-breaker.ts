// The circuit breaker: after N consecutive store failures, skip the store until a cooldown passes.

/** What a breaker transition was, for the limiter to announce ('breaker-open' / 'breaker-close'). */
export type BreakerTransition = 'opened' | 'closed' | undefined

/**
 * Closed: every call goes to the store. Open: none does, until `cooldownMs` after opening (or
 * until the store reports it may answer again, see probeNow); then half-open: exactly one probe
 * call goes through while the others still skip; the probe's success closes the breaker, its
 * failure opens it again for another cooldown.
 */
export class CircuitBreaker {
  readonly failures: number
  readonly cooldownMs: number
  private state: 'closed' | 'open' | 'half-open' = 'closed'
  private consecutive = 0
  private openedAt = 0

  constructor(failures: number, cooldownMs: number) {
    this.failures = failures
    this.cooldownMs = cooldownMs
  }

  /** Consecutive failures so far (0 after a success). */
  get streak(): number {
    return this.consecutive
  }

  /** True while calls skip the store (open, or half-open with the probe in flight). */
  get isOpen(): boolean {
    return this.state !== 'closed'
  }

  /** Whether a call may go to the store at `now`; the first call after the cooldown becomes the probe. */
  allows(now: number): boolean {
    if (this.state === 'closed') return true
    if (this.state === 'open' && now >= this.openedAt + this.cooldownMs) {
      this.state = 'half-open'
      return true
    }
    return false
  }

  /**
   * The store says it may answer again (reconnected, or its Cluster's slot map changed): an open
   * breaker lets the next call probe at once instead of waiting out the cooldown. A probe in
   * flight, or a closed breaker, is left as it is.
   */
  probeNow(): void {
    if (this.state === 'open') this.openedAt = -Infinity
  }

  /** Milliseconds until the next probe may go (0 when closed): a fair Retry-After for fail-closed. */
  waitMs(now: number): number {
    if (this.state === 'closed') return 0
    return Math.max(1, Math.min(this.cooldownMs, this.openedAt + this.cooldownMs - now))
  }

  /** A store call answered: the failure streak ends, and an open breaker closes. */
  recordSuccess(): BreakerTransition {
    this.consecutive = 0
    if (this.state === 'closed') return undefined
    this.state = 'closed'
    return 'closed'
  }

  /** A store call failed or timed out at `now`: the streak grows, and at `failures` the breaker opens. */
  recordFailure(now: number): BreakerTransition {
    this.consecutive++
    if (this.state === 'half-open') {
      // The probe failed: stay open for another cooldown; it never closed, so no new announcement.
      this.state = 'open'
      this.openedAt = now
      return undefined
    }
    if (this.state === 'closed' && this.consecutive >= this.failures) {
      this.state = 'open'
      this.openedAt = now
      return 'opened'
    }
    return undefined
  }
}
