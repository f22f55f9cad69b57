// bench:memory's contenders that run each in a process of their own: Floodgate's limiter on the
// MemoryStore per algorithm, rate-limiter-flexible, and the floors (see bench/memory.ts).

import { RateLimiterMemory } from 'rate-limiter-flexible'
import { RateLimiter, MemoryStore, createPolicies, type AlgorithmName } from '../packages/floodgate/src/index.js'
import { createEvaluation, evaluateKeyInto, type PolicyRecord } from '../packages/floodgate/src/core/evaluate.js'
import { copyState, createStepResult } from '../packages/floodgate/src/core/algorithms/types.js'
import { ALGORITHM_BY_NAME, type State } from '../packages/floodgate/src/core/algorithms/index.js'
import { decisionLiteral, floorDecision, type Contender } from './support.js'
import { awaitLoop, KEYS, longLived, OPS, policyFor, syncLoop } from './memory-options.js'

export function floodgateBig([algorithm, limit]: [AlgorithmName, number]): Contender {
  return {
    name: `floodgate ${algorithm} ${limit === 1e6 ? '1e6' : '1e5'}/h`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [{ algorithm, limit, period: '1h' }] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

// Lapsed against live, on the same store clock: it reads a fixed time, or (lapsed) jumps two hours
// each time the loop has visited every key, so every visit finds the key's state expired but its
// entry still held (updated in place). Keys the store has already shed and must re-create are what
// the 1e6/h rows above meet.
export function floodgateLapse(algorithm: AlgorithmName, lapsed: boolean): Contender {
  return {
    name: `floodgate ${algorithm} ${lapsed ? 'lapsed' : 'live'} keys`,
    measure: longLived(() => {
      const base = Date.now()
      let calls = 0
      const clock = lapsed ? () => base + Math.floor(calls++ / KEYS) * 7_200_000 : () => base + 0 * calls++
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2, clock }), policies: [policyFor(algorithm)] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

export function floodgate(algorithm: AlgorithmName): Contender {
  return {
    name: `floodgate ${algorithm}`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [policyFor(algorithm)] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

// The same limiter answering synchronously (`limitSync`, the MemoryStore's evaluateSync): no promise, no await.
export function floodgateSync(algorithm: AlgorithmName): Contender {
  return {
    name: `floodgate ${algorithm} limitSync`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [policyFor(algorithm)] })
      return () => Promise.resolve(syncLoop((key) => limiter.limitSync(key)))
    }),
  }
}

// A diagnostic floor, not a product path: the shared core (evaluateKeyInto + the algorithm) alone,
// as the store calls it, records in a plain array (states copied in place, as the store keeps
// them), no Map, no clock, no Decision, no await. Everything a limiter call adds on top of it is
// the store's and the limiter's cost.
export const coreOnly: Contender = {
  name: 'core only: evaluateKeyInto fixed-window (sync)',
  measure: longLived(() => {
    const policies = createPolicies([policyFor('fixed-window')])
    const records: PolicyRecord[] = Array.from({ length: KEYS }, () => ({ blockedUntil: 0, state: undefined }))
    const scratch: (PolicyRecord | undefined)[] = [undefined]
    const evaluation = createEvaluation()
    return () => {
      const now = Date.now()
      const start = performance.now()
      for (let i = 0; i < OPS; i++) {
        const record = records[i % KEYS]
        scratch[0] = record
        const next = evaluateKeyInto(scratch, now, 1, policies, evaluation).records[0]
        record.blockedUntil = next.blockedUntil
        if (next.state === undefined) continue
        if (record.state === undefined) record.state = next.state.slice()
        else copyState(record.state, next.state)
      }
      return Promise.resolve((OPS * 1000) / (performance.now() - start))
    }
  }),
}

// A diagnostic floor for any limiter with this API, not a product path: what every call of an
// honest in-process limiter cannot avoid — an async call, a Map read, one clock reading (decisions
// depend on the time) and a new decision as complete as Floodgate's (with its one policy part) —
// with no limiting logic at all.
export const apiFloor: Contender = {
  name: 'floor: Map + Date.now + decision object (async)',
  measure: longLived(() => {
    const counts = new Map<string, { count: number }>()
    for (let i = 0; i < KEYS; i++) counts.set(`user:${i}`, { count: 0 })
    const hit = async (key: string) => floorDecision(counts.get(key)!, Date.now())
    return () => awaitLoop(hit)
  }),
}

// A diagnostic floor of the API alone, not a product path: what limit() must do whatever its store
// does — a new decision as complete as Floodgate's (with its one policy part), its values read from a
// held answer as the direct path reads the store's, resolved through a promise — with no key lookup,
// no clock and no limiting. The async floor's time above this row's is its Map read and clock.
export const promiseFloor: Contender = {
  name: 'api floor: Promise + decision object only',
  measure: longLived(() => {
    const answer = { remaining: 0, resetMs: 0 }
    const hit = (_key: string) => {
      answer.remaining++
      return Promise.resolve(decisionLiteral(answer.remaining, answer.resetMs))
    }
    return () => awaitLoop(hit)
  }),
}

// A diagnostic, not a product path: the MemoryStore's one-policy call alone (evaluateSync with the
// limiter's request, fixed-window, its kernel path), in a synchronous loop, no limiter, Decision or
// promise. limit() above it is the limiter layer, the decision and the promise.
export const storeOnly: Contender = {
  name: 'store only: MemoryStore.evaluateSync fixed-window (sync)',
  measure: longLived(() => {
    const store = new MemoryStore({ maxKeys: KEYS * 2 })
    const policies = createPolicies([policyFor('fixed-window')])
    return () => Promise.resolve(syncLoop((key) => store.evaluateSync({ key, policies, cost: 1 }).allowed))
  }),
}

// The synchronous counterpart of the floor, for limitSync: the same Map read, clock reading and
// decision object, with no async call and no await.
export const syncFloor: Contender = {
  name: 'sync floor: Map + Date.now + decision object',
  measure: longLived(() => {
    const counts = new Map<string, { count: number }>()
    for (let i = 0; i < KEYS; i++) counts.set(`user:${i}`, { count: 0 })
    const hit = (key: string) => floorDecision(counts.get(key)!, Date.now())
    return () => Promise.resolve(syncLoop(hit))
  }),
}

/**
 * The bounded floor's call: what the floor does, plus the least that a limiter keeping its states
 * within a bound must add on this core. Each key indexes one typed array of states (no object per
 * key), the shared algorithm step (core/algorithms, the one TypeScript copy) runs on the state read
 * from it, and the state is written back with its expiry; the LRU upkeep is the cheapest there is (a
 * key moves to the young end only when half the store moved since it last did: here none ever
 * must). No policy sets, modes, deny cache, eviction classes or byte count. A diagnostic, not a
 * product path: it says how near the async floor any honest bounded limiter on this core can come.
 */
function boundedFloorHit(): (key: string) => ReturnType<typeof decisionLiteral> {
  const [policy] = createPolicies([policyFor('fixed-window')])
  const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
  const index = new Map<string, number>()
  const words = new Float64Array(KEYS * 3)
  const movedAt = new Float64Array(KEYS)
  let moves = 0
  for (let i = 0; i < KEYS; i++) index.set(`user:${i}`, i)
  const held: State = [0, 0]
  const stepped = createStepResult()
  return (key) => {
    const at = index.get(key)!
    const now = Date.now()
    const base = at * 3
    let state: State | undefined
    if (now < words[base]) {
      held[0] = words[base + 1]
      held[1] = words[base + 2]
      state = held
    }
    const step = algorithm.step(state, now, 1, policy, stepped)
    const next = step.state
    words[base] = now + algorithm.ttlMs(next, now, policy)
    words[base + 1] = next[0]
    words[base + 2] = next[1]
    if (moves - movedAt[at] > KEYS / 2) {
      movedAt[at] = ++moves
      index.delete(key)
      index.set(key, at)
    }
    return decisionLiteral(step.remaining, now)
  }
}

export const boundedFloor: Contender = {
  name: 'bounded floor: typed array + core step (async)',
  measure: longLived(() => {
    const hit = boundedFloorHit()
    return () => awaitLoop(async (key) => hit(key))
  }),
}

export const boundedSyncFloor: Contender = {
  name: 'bounded sync floor: typed array + core step',
  measure: longLived(() => {
    const hit = boundedFloorHit()
    return () => Promise.resolve(syncLoop(hit))
  }),
}

export const rateLimiterFlexible: Contender = {
  name: 'rate-limiter-flexible RateLimiterMemory',
  measure: longLived(() => {
    const limiter = new RateLimiterMemory({ points: 1_000_000_000, duration: 3600 })
    return () => awaitLoop((key) => limiter.consume(key))
  }),
}

// The physical limit of an in-process limiter: one Map read and write per decision, through an
// async function and an await as every limiter call is.
export const bareMap: Contender = {
  name: 'bare Map counter (async)',
  measure: longLived(() => {
    const counts = new Map<string, number>()
    const hit = async (key: string): Promise<number> => {
      const count = (counts.get(key) ?? 0) + 1
      counts.set(key, count)
      return count
    }
    return () => awaitLoop(hit)
  }),
}
