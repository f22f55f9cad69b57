// Policies: what users write (PolicyOptions), validated once into what the engine runs (Policy).

import { parseDuration, formatDuration, type Duration } from './duration.js'
import { FloodgateError } from './errors.js'
import { SYNC_DEFAULTS, SYNC_MODES, syncRefusal, type SyncMode } from './sync.js'
import { REGION_MODES, regionRefusal, type RegionMode } from './regions.js'

/**
 * The algorithms, by name: the one list of them. The registry (`algorithms/index.ts`) and the Redis
 * key tags map each of these names, checked by the compiler; the Lua scripts are read by these names.
 */
export const ALGORITHMS = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra', 'concurrency'] as const

export type AlgorithmName = (typeof ALGORITHMS)[number]

/**
 * How a policy enforces its limit.
 * - `hard`: deny past the limit.
 * - `soft`: admit up to `overage` over the limit (0.1 = 10%); such decisions say `over: true`.
 * - `elastic`: past the limit, admit up to `ceiling` while the shared pool (spare capacity) admits.
 */
export type Mode = 'hard' | 'soft' | 'elastic'

/** A policy as users write it (options, config). Durations may be strings. */
export interface PolicyOptions {
  /** Names the policy in decisions, headers and metrics; unique within one limiter. Defaults to `<algorithm>-<limit>-per-<period>`. */
  name?: string
  algorithm: AlgorithmName
  /**
   * Requests (cost units) per `period`; for `concurrency`, the number in flight. `fixed-window`
   * also takes 0: deny every request (envoyproxy/ratelimit's `requests_per_unit: 0`).
   */
  limit: number
  /** The window or refill period; for `concurrency`, how long a lease lives unless released. */
  period: Duration
  /** Capacity for token-bucket, gcra and leaky-bucket (queue size): how many may pass at once. Defaults to `limit`. */
  burst?: number
  /** leaky-bucket only: `true` admits with a `delayMs` to wait (shaping); `false` (default) rejects when full (policing). */
  shaping?: boolean
  mode?: Mode
  /** `soft` mode: the fraction allowed over the limit, e.g. 0.1 for 10%. */
  overage?: number
  /** `elastic` mode: the most this key may use while the pool has spare capacity; must be ≥ `limit`. */
  ceiling?: number
  /** After a denial, keep the key denied for this long (a block period after abuse). */
  blockMs?: Duration
  /** Decide and report, but never deny. */
  shadow?: boolean
  /**
   * How the state is kept (see `SyncMode` and docs/sync.md): `always` (default: exact, in the store),
   * `lease`, `write-back` or `auto`. Every policy of one key must use the same mode, because they
   * are decided together. Modes a policy's algorithm cannot honour are refused with the reason.
   */
  sync?: SyncMode
  /** `write-back` only: how often deltas are flushed to the store (default 50 ms). */
  flushMs?: Duration
  /**
   * `lease` and `auto` only: the longest a lease lives (default 1 s, and never past a window's end).
   * Its unused units go back to the store when it ends; shorter wastes fewer units on an instance
   * that goes quiet, longer calls the store less often.
   */
  leaseMs?: Duration
  /**
   * `lease` and `auto` only: the most units one instance holds of one key at once (default: an
   * eighth of what a fresh key may spend at once, at least 1). Bounds the units idle instances keep.
   */
  leaseMax?: number
  /**
   * `auto` only: decisions per second of one key on this instance at which it moves to leases, and
   * back to exact below half of it (default: 12 per `leaseMs`, so 12 a second at the default 1 s). The
   * rate is read over the time in which a key at `hotRate` makes 16 decisions (at least 1 s).
   */
  hotRate?: number
  /**
   * How the limit is shared between regions that each keep their own store, when a RegionSync
   * links them (see docs/regions.md): `shared` (every region counts what it heard of the others'
   * use; bounded over-admission) or `split` (allotments that never sum above the limit). Omitted:
   * the limit is per region. Refused with the reason for algorithms that cannot merge usage.
   */
  regions?: RegionMode
}

/** A validated policy: numbers only, durations in milliseconds. Immutable. */
export interface Policy {
  readonly name: string
  readonly algorithm: AlgorithmName
  readonly limit: number
  readonly periodMs: number
  readonly burst: number
  readonly shaping: boolean
  readonly mode: Mode
  readonly overage: number
  readonly ceiling: number
  readonly blockMs: number
  readonly shadow: boolean
  readonly sync: SyncMode
  /** `write-back`: flush interval in ms (SYNC_DEFAULTS.flushMs for other modes, unused). */
  readonly flushMs: number
  /** `lease`/`auto`: the longest a lease lives, in ms. */
  readonly leaseMs: number
  /** `lease`/`auto`: the most units one instance holds of one key. */
  readonly leaseMax: number
  /** `auto`: decisions per second of one key on one instance that make it hot. */
  readonly hotRate: number
  /** How the limit is shared between regions; absent when the limit is per region. */
  readonly regions?: RegionMode
  /**
   * Set by callers that count with this policy and compare the count with a limit of their own
   * (envoyproxy/ratelimit-style counting: `limit` is then only the counter's ceiling). The memory
   * store judges from it whether a key is near its limit, which decides what a flood of new keys
   * may evict. Not a user option: `createPolicy` never sets it.
   */
  readonly nominalLimit?: number
}

const KNOWN_FIELDS = new Set([
  'name',
  'algorithm',
  'limit',
  'period',
  'burst',
  'shaping',
  'mode',
  'overage',
  'ceiling',
  'blockMs',
  'shadow',
  'sync',
  'flushMs',
  'leaseMs',
  'leaseMax',
  'hotRate',
  'regions',
])

/** Validates one policy; every error names the field (prefixed by `where`, e.g. `policies[1]`). */
export function createPolicy(options: PolicyOptions, where = 'policy'): Policy {
  if (options === null || typeof options !== 'object') {
    throw invalid(where, `expected an object like { algorithm: 'gcra', limit: 10, period: '1s' }`)
  }
  for (const field of Object.keys(options)) {
    if (!KNOWN_FIELDS.has(field)) {
      throw invalid(`${where}.${field}`, `unknown option; known options are ${[...KNOWN_FIELDS].join(', ')}`)
    }
  }
  const algorithm = options.algorithm
  if (!(ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw invalid(`${where}.algorithm`, `unknown algorithm ${JSON.stringify(algorithm)}; use one of ${ALGORITHMS.join(', ')}`)
  }
  // Only a fixed window can express "deny everything": the others divide by the limit.
  const limit = algorithm === 'fixed-window' && options.limit === 0 ? 0 : positiveInteger(options.limit, `${where}.limit`)
  const periodMs = parseDuration(options.period, `${where}.period`)
  const burst =
    options.burst === undefined ? Math.max(limit, 1) : positiveInteger(options.burst, `${where}.burst`, 'burst must be at least 1')
  if (options.shaping !== undefined && typeof options.shaping !== 'boolean') {
    throw invalid(`${where}.shaping`, 'must be true or false')
  }
  if (options.shaping && algorithm !== 'leaky-bucket') {
    throw invalid(`${where}.shaping`, `only applies to leaky-bucket, not ${algorithm}`)
  }
  const mode = options.mode ?? 'hard'
  if (mode !== 'hard' && mode !== 'soft' && mode !== 'elastic') {
    throw invalid(`${where}.mode`, `unknown mode ${JSON.stringify(mode)}; use hard, soft or elastic`)
  }
  let overage = 0
  if (mode === 'soft') {
    if (typeof options.overage !== 'number' || !Number.isFinite(options.overage) || options.overage <= 0) {
      throw invalid(`${where}.overage`, 'soft mode needs overage > 0, e.g. 0.1 to allow 10% over the limit')
    }
    overage = options.overage
  } else if (options.overage !== undefined) {
    throw invalid(`${where}.overage`, `only applies to mode 'soft'`)
  }
  let ceiling = limit
  if (mode === 'elastic') {
    ceiling = positiveInteger(options.ceiling, `${where}.ceiling`)
    if (ceiling < limit) throw invalid(`${where}.ceiling`, `must be at least the limit (${limit}), got ${ceiling}`)
  } else if (options.ceiling !== undefined) {
    throw invalid(`${where}.ceiling`, `only applies to mode 'elastic'`)
  }
  const scale = mode === 'soft' ? 1 + overage : mode === 'elastic' && limit > 0 ? ceiling / limit : 1
  checkExact(algorithm, limit, burst, periodMs, mode, scale, where)
  const blockMs = options.blockMs === undefined ? 0 : parseDuration(options.blockMs, `${where}.blockMs`)
  if (options.shadow !== undefined && typeof options.shadow !== 'boolean') {
    throw invalid(`${where}.shadow`, 'must be true or false')
  }
  const name = options.name ?? `${algorithm}-${limit}-per-${formatDuration(periodMs)}`
  if (typeof name !== 'string' || name.length === 0) throw invalid(`${where}.name`, 'must be a non-empty string')
  const shaping = options.shaping ?? false
  const sync = readSync(options, where, algorithm, shaping, mode, blockMs, limit)
  return Object.freeze({
    name,
    algorithm,
    limit,
    periodMs,
    burst,
    shaping,
    mode,
    overage,
    ceiling,
    blockMs,
    shadow: options.shadow ?? false,
    ...sync,
    ...readRegions(options, where, algorithm, mode, sync.sync),
  })
}

// Present only when set, so policies without regions keep their shape.
function readRegions(
  options: PolicyOptions,
  where: string,
  algorithm: AlgorithmName,
  mode: Mode,
  sync: SyncMode,
): { regions?: RegionMode } {
  const regions = options.regions
  if (regions === undefined) return {}
  if (!REGION_MODES.includes(regions)) {
    throw invalid(`${where}.regions`, `unknown region mode ${JSON.stringify(regions)}; use one of ${REGION_MODES.join(', ')}`)
  }
  const refusal = regionRefusal(regions, algorithm, mode, sync)
  if (refusal !== undefined) throw invalid(`${where}.regions`, `${regions} is not sound for this policy: ${refusal}`)
  return { regions }
}

type SyncFields = Pick<Policy, 'sync' | 'flushMs' | 'leaseMs' | 'leaseMax' | 'hotRate'>

// The sync mode and its knobs; a knob given for a mode that does not use it is an error, not ignored.
function readSync(
  options: PolicyOptions,
  where: string,
  algorithm: AlgorithmName,
  shaping: boolean,
  mode: Mode,
  blockMs: number,
  limit: number,
): SyncFields {
  const sync = options.sync ?? 'always'
  if (!SYNC_MODES.includes(sync)) {
    throw invalid(`${where}.sync`, `unknown sync mode ${JSON.stringify(sync)}; use one of ${SYNC_MODES.join(', ')}`)
  }
  const refusal = syncRefusal(sync, algorithm, shaping, mode, blockMs)
  if (refusal !== undefined) throw invalid(`${where}.sync`, `${sync} is not sound for this policy: ${refusal}`)
  const leases = sync === 'lease' || sync === 'auto'
  const onlyFor = (field: keyof PolicyOptions, allowed: boolean, modes: string): void => {
    if (options[field] !== undefined && !allowed) throw invalid(`${where}.${field}`, `only applies to sync ${modes}, not ${sync}`)
  }
  onlyFor('flushMs', sync === 'write-back', "'write-back'")
  onlyFor('leaseMs', leases, "'lease' and 'auto'")
  onlyFor('leaseMax', leases, "'lease' and 'auto'")
  onlyFor('hotRate', sync === 'auto', "'auto'")
  const flushMs = options.flushMs === undefined ? SYNC_DEFAULTS.flushMs : parseDuration(options.flushMs, `${where}.flushMs`)
  const leaseMs = options.leaseMs === undefined ? SYNC_DEFAULTS.leaseMs : parseDuration(options.leaseMs, `${where}.leaseMs`)
  const capacity = Math.max(1, algorithm === 'token-bucket' || algorithm === 'gcra' ? (options.burst ?? limit) : limit)
  const leaseMax =
    options.leaseMax === undefined ? Math.max(1, Math.floor(capacity / 8)) : positiveInteger(options.leaseMax, `${where}.leaseMax`)
  if (leaseMax > capacity)
    throw invalid(`${where}.leaseMax`, `must be at most what a fresh key may spend at once (${capacity}), got ${leaseMax}`)
  let hotRate = (SYNC_DEFAULTS.hotDecisionsPerLease * 1000) / leaseMs
  if (options.hotRate !== undefined) {
    if (typeof options.hotRate !== 'number' || !Number.isFinite(options.hotRate) || options.hotRate <= 0) {
      throw invalid(`${where}.hotRate`, `must be a number of decisions per second greater than 0, got ${JSON.stringify(options.hotRate)}`)
    }
    hotRate = options.hotRate
  }
  return { sync, flushMs, leaseMs, leaseMax, hotRate }
}

/** Validates a list of policies for one key: at least one, names unique. */
export function createPolicies(options: readonly PolicyOptions[], where = 'policies'): Policy[] {
  if (!Array.isArray(options) || options.length === 0) {
    throw invalid(where, 'give at least one policy')
  }
  const policies = options.map((option, i) => createPolicy(option, `${where}[${i}]`))
  const seen = new Set<string>()
  for (const [i, policy] of policies.entries()) {
    if (seen.has(policy.name)) {
      throw invalid(`${where}[${i}].name`, `duplicate policy name ${JSON.stringify(policy.name)}; give each policy its own name`)
    }
    seen.add(policy.name)
  }
  const mixed = syncMismatch(policies)
  if (mixed !== undefined) throw invalid(`${where}[${mixed}].sync`, syncMismatchMessage(policies, mixed))
  return policies
}

/**
 * The index of the first policy whose `sync` differs from the first one's, or undefined. Policies
 * of one key are decided together (all-or-nothing), so they must be kept the same way.
 */
export function syncMismatch(policies: readonly Policy[]): number | undefined {
  for (let i = 1; i < policies.length; i++) if (policies[i].sync !== policies[0].sync) return i
  return undefined
}

/** Says what is wrong with the policy at `index` (see `syncMismatch`). */
export function syncMismatchMessage(policies: readonly Policy[], index: number): string {
  return (
    `is ${policies[index].sync} but ${policies[0].name} is ${policies[0].sync}; policies of one key are decided together, ` +
    'all-or-nothing, so give them the same sync mode'
  )
}

/**
 * The largest count a policy may hold: 2^53 - 1. A state counted past it in a double (JavaScript,
 * Lua, the memcached records) no longer moves by one unit, so a hit would be admitted and not
 * counted; below it, every admitted cost is charged whole (costs above a policy's capacity never
 * reach a store: see RateLimiter.limit). And any cost above 2^53 (an Envoy uint64 hits addend read
 * as a number) rounds to 2^53 or more, never into an admissible cost.
 */
export const MAX_COUNT = Number.MAX_SAFE_INTEGER

const TOO_LARGE = `a count above ${MAX_COUNT} (2^53 - 1) cannot move by one unit in a double, so hits would be admitted uncharged`

function positiveInteger(value: unknown, field: string, message = 'must be a whole number greater than 0'): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw invalid(field, `${message}, got ${JSON.stringify(value)}`)
  }
  if (value > MAX_COUNT) throw invalid(field, `must be at most ${MAX_COUNT}, got ${value}: ${TOO_LARGE}`)
  return value
}

/** Algorithms that count in ticks of 1/periodMs unit (or ms × limit), so `capacity × periodMs` must be exact too. */
const TICKED: ReadonlySet<AlgorithmName> = new Set(['sliding-window', 'token-bucket', 'leaky-bucket', 'gcra'])

/**
 * Refuses a policy whose counts a double cannot keep exact as it runs: soft and elastic modes scale
 * its capacity (by 1 + overage, by ceiling / limit; see scaledPolicy), and the ticked algorithms
 * count `capacity × periodMs` (see their files). Past that, a charge could round away.
 */
function checkExact(
  algorithm: AlgorithmName,
  limit: number,
  burst: number,
  periodMs: number,
  mode: Mode,
  factor: number,
  where: string,
): void {
  const base = algorithm === 'sliding-window' ? limit : Math.max(limit, burst)
  const field = mode === 'soft' ? 'overage' : mode === 'elastic' ? 'ceiling' : base === limit ? 'limit' : 'burst'
  const capacity = Math.floor(base * factor)
  if (capacity > MAX_COUNT) {
    throw invalid(`${where}.${field}`, `the policy as it runs (capacity ${capacity}) must count at most ${MAX_COUNT}: ${TOO_LARGE}`)
  }
  if (TICKED.has(algorithm) && capacity * periodMs > MAX_COUNT) {
    const most = Math.max(1, Math.floor(MAX_COUNT / periodMs))
    throw invalid(
      `${where}.${field}`,
      `${algorithm} counts capacity × period in ms (${capacity} × ${periodMs}), which must be at most ${MAX_COUNT}: ` +
        `${TOO_LARGE}; at most ${most} for this period, or the same rate over a shorter period`,
    )
  }
}

function invalid(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_POLICY', `${field}: ${message}`)
}
