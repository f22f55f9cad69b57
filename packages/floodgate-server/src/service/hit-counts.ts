// How one descriptor's hits split across the per-rule counters: upstream's arithmetic for
// upstream-format rules, Floodgate's for `limits:` rules.

import type { DescriptorOutcome, EnvoyStatus } from './decide.js'
import type { HitCounts } from './metrics.js'

/** Upstream's near-limit threshold: floor(limit × ratio) in 32-bit floating point, as its Go code computes it. */
export function nearLimitThreshold(limit: number, ratio: number): number {
  return Math.floor(Math.fround(Math.fround(limit) * Math.fround(ratio)))
}

/**
 * Upstream's per-rule stats for one descriptor: a request that crosses a threshold counts only
 * the hits past it (over the limit: the rest of the way to the limit counts as near).
 * `hits` is the addend and `status.count` the count after the request. As upstream, the count
 * before is taken as `count - hits` even when STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT left the
 * counter as it was (upstream's stats read it so; it only saturates at 0 here instead of wrapping).
 */
export function upstreamCounts(hits: number, shadow: boolean, status: EnvoyStatus, ratio: number): HitCounts {
  const counts: HitCounts = { total: hits, over: 0, near: 0, within: 0, shadow: 0, denyCache: 0 }
  const limit = status.requestsPerUnit
  const after = status.count
  const before = Math.max(0, after - hits)
  const near = nearLimitThreshold(limit, ratio)
  if (status.over) {
    const overHits = before >= limit ? hits : after - limit
    counts.over = overHits
    if (before < limit) counts.near = limit - Math.max(near, before)
    if (shadow) counts.shadow = overHits
  } else {
    counts.within = hits
    if (after > near) counts.near = before >= near ? hits : after - near
  }
  return counts
}

/** Floodgate's counts for a `limits:` rule: every hit of the request lands in one bucket. */
export function floodgateCounts(hits: number, outcome: Extract<DescriptorOutcome, { kind: 'limited' }>): HitCounts {
  const counts: HitCounts = { total: hits, over: 0, near: 0, within: 0, shadow: 0, denyCache: 0 }
  if (outcome.decision.source === 'deny-cache') counts.denyCache = hits
  if (outcome.wouldDeny) {
    counts.over = hits
    counts.shadow = hits
  } else if (!outcome.allowed) {
    counts.over = hits
  } else {
    counts.within = hits
    if (outcome.near) counts.near = hits
  }
  return counts
}
