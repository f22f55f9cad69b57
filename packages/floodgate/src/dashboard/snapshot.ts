// The dashboard's one JSON document (`GET <dashboard>/data.json`): its shape, for the page and other tools (docs/dashboard.md).

import type { SyncState } from '../limiter/sync-state.js'

/** Regions (`RegionSync`): this region's links to its peers, as `RegionSync.status()` reports them. */
export interface RegionsSnapshot {
  region: string
  /** Peers not heard from lately: their region keeps serving, with older knowledge of it. */
  degraded: string[]
  peers: {
    name: string
    /** The last exchange succeeded. */
    up: boolean
    /** Age of the freshest usage held from the peer, ms; null before the first exchange. */
    lagMs: number | null
    /** Time since the last successful exchange, ms; null before the first. */
    lastHeardMsAgo: number | null
    /** Usage hashes sent and received, and failed exchanges, since start. */
    sent: number
    received: number
    failures: number
  }[]
  /** Units of split limits handed to peers; units of peers' use charged here (shared buckets); counts lost to the memory bound. */
  unitsGiven: number
  unitsClaimed: number
  lost: number
}

/** Lease, write-back and region state: the limiter's `syncState()` and the regions' links; a part is null while unused. */
export interface SyncSnapshot extends SyncState {
  regions: RegionsSnapshot | null
}

/** One rule (or, for a limiter in an app, one deciding policy). */
export interface RuleSnapshot {
  rule: string
  /** Units allowed / denied since start. */
  allowed: number
  denied: number
  /** Averages over the last 10 whole seconds. */
  allowedPerSecond: number
  deniedPerSecond: number
  /** Per-second units, aligned with `series.time`; present for the busiest rules only. */
  series?: { allowed: number[]; denied: number[] }
}

export interface DashboardSnapshot {
  /** Bumped when a field changes meaning or goes away; new fields do not bump it. */
  version: 1
  /** When the snapshot was taken, ms since the epoch. */
  now: number
  /** How often the page asks again, in ms. */
  refreshMs: number
  /** One value per whole second, oldest first; the second in progress is not included. */
  series: {
    stepMs: 1000
    /** Unix time in seconds of each value. */
    time: number[]
    /** Units allowed / denied in that second (decisions/s for requests of cost 1). */
    allowed: number[]
    denied: number[]
    /** Decisions made without the store (the failure mode) in that second. */
    fallback: number[]
    /** Store call latency quantiles of that second, in ms (a bucket's upper bound); null with no call. */
    storeLatencyP50Ms: (number | null)[]
    storeLatencyP99Ms: (number | null)[]
  }
  /** Units since start: the sums of the service's `floodgate_within_limit` and `floodgate_over_limit` counters. */
  totals: { allowed: number; denied: number }
  /** Every rule seen, the busiest of the last 10 s first; then loaded rules not hit yet, with zero counts. */
  rules: RuleSnapshot[]
  /** The most denied keys over the last few minutes (Space-Saving estimates: `denied` never undercounts, by at most `error`). */
  topKeys: {
    /** Keys are `sha256:` and 16 hex digits of the key text unless the operator chose raw keys. */
    hashed: boolean
    spanMs: number
    windowMs: number
    capacity: number
    keys: { key: string; denied: number; error: number }[]
  }
  store: {
    kind: string
    breaker: 'open' | 'closed'
    /** The shards whose breaker is open: `host:port` of a memcached server or Cluster master, `''` for the whole store. */
    openShards: string[]
    /** Store calls that failed or timed out, since start. */
    errors: number
    /** Decisions made by each failure mode, since start. */
    fallbacks: { open: number; closed: number; local: number }
    /** Store call latency over the last 10 whole seconds; null for an in-process store (no I/O to time). */
    latency: { windowMs: number; samples: number; p50Ms: number | null; p99Ms: number | null } | null
  }
  /** Rules loaded, their files and the last reload error; null when nothing describes them. */
  config: { rules: number; files: readonly string[]; lastReloadError: readonly string[] | null } | null
  /** Lease, write-back and region state; null when no policy uses a sync mode and there are no regions. */
  sync: SyncSnapshot | null
}
