// Concurrency: at most `limit` leases in flight at once; its Lua twin scripts/concurrency.lua is generated from it.
//
// State: the leases in flight as pairs `[expiry1, count1, expiry2, count2, …]`, earliest expiry
// first, each expiry once. A lease taken at `now` expires at `now + periodMs` unless released
// first, so a holder that crashed cannot keep its slot forever. Acquiring `cost` leases is admitted
// when `inFlight + cost <= limit`; they share one pair, so the state grows with the number of
// distinct acquisition times in flight, not with the cost.
//
// Releasing (a refund, cost < 0, which is how the limiter's `release(lease)` works) removes the
// leases with the *earliest* expiry, because the state does not know which lease is released.
// That is conservative: after removing the earliest instead of the true one, each remaining
// expiry is at least the true remaining one of the same rank, so the count at any later time is
// never below the truth and the limit is never exceeded. The price is that a slot may look taken
// a little longer than it is. A release of a lease that has already expired must not be sent (it
// would remove a live one); the limiter knows the lease's expiry and skips it.

import type { Policy } from '../policy.js'
import { copyState, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The concurrency algorithm. `remaining`: leases still free; `resetMs`: until every lease in
 * flight has expired; `retryAfterMs`: until enough of the earliest leases expire for this cost (a
 * release may come sooner). A cost above `limit` never passes; it gets `resetMs`.
 */
export const concurrency: Algorithm = {
  name: 'concurrency',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs } = policy
    let leases = concurrencyLive(state, now)
    const inFlight = concurrencyCount(leases)

    let allowed = true
    if (cost > 0) {
      allowed = inFlight + cost <= limit
      if (allowed) leases = concurrencyAcquired(leases, cost, now + periodMs)
    } else if (cost < 0) {
      leases = concurrencyReleased(leases, -cost)
    } else {
      allowed = inFlight <= limit
    }

    const resetMs = leases.length > 0 ? leases[leases.length - 2] - now : 0
    let retryAfterMs = 0
    // Denied: the (inFlight + cost - limit)-th earliest lease must expire first.
    if (!allowed) retryAfterMs = cost > limit ? resetMs : concurrencyExpiryOf(leases, inFlight + cost - limit) - now
    const result = writeStep(out, allowed, Math.max(0, limit - concurrencyCount(leases)), resetMs, retryAfterMs, 0)
    copyState(result.state, leases)
    return result
  },

  ttlMs(state: State, now: number): number {
    return state.length > 0 ? Math.max(1, state[state.length - 2] - now) : 1
  },
}

/** The lease pairs still in flight at `now` (expiry after now). */
function concurrencyLive(state: State | undefined, now: number): number[] {
  const leases: number[] = []
  if (state === undefined) return leases
  for (let i = 0; i < state.length; i += 2) {
    if (state[i] > now) leases.push(state[i], state[i + 1])
  }
  return leases
}

/** How many leases the pairs hold. */
function concurrencyCount(leases: number[]): number {
  let count = 0
  for (let i = 1; i < leases.length; i += 2) count = count + leases[i]
  return count
}

/** The expiry of the `rank`-th earliest lease (1-based). */
function concurrencyExpiryOf(leases: number[], rank: number): number {
  let seen = 0
  for (let i = 0; i < leases.length; i += 2) {
    seen = seen + leases[i + 1]
    if (seen >= rank) return leases[i]
  }
  return leases[leases.length - 2]
}

/** The pairs with `cost` more leases expiring at `expiry`, kept in order (a clock that stepped back may have later ones). */
function concurrencyAcquired(leases: number[], cost: number, expiry: number): number[] {
  const out: number[] = []
  let i = 0
  while (i < leases.length && leases[i] < expiry) {
    out.push(leases[i], leases[i + 1])
    i += 2
  }
  if (i < leases.length && leases[i] === expiry) {
    out.push(expiry, leases[i + 1] + cost)
    i += 2
  } else {
    out.push(expiry, cost)
  }
  while (i < leases.length) {
    out.push(leases[i], leases[i + 1])
    i += 2
  }
  return out
}

/** The pairs without the `released` earliest-expiring leases (all of them if fewer). */
function concurrencyReleased(leases: number[], released: number): number[] {
  const out: number[] = []
  let left = released
  for (let i = 0; i < leases.length; i += 2) {
    if (left >= leases[i + 1]) {
      left = left - leases[i + 1]
    } else {
      out.push(leases[i], leases[i + 1] - left)
      left = 0
    }
  }
  return out
}
