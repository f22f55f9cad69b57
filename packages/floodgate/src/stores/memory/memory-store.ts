// The embedded store: every key's policy records in process memory, bounded in keys and bytes by
// LRU eviction that drops unrestricted keys before limited ones, decided by the same evaluateKey
// that the Redis runner mirrors.

import {
  createEvaluation,
  evaluateKeyInto,
  type KeyEvaluation,
  type PolicyRecord,
  type PolicyResult,
  sizeEvaluation,
} from '../../core/evaluate.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import { ALGORITHM_BY_NAME } from '../../core/algorithms/index.js'
import { mergeKey } from '../../core/merge.js'
import type { EvaluateRequest, EvaluateResponse, LeaseRequest, LeaseResponse, LeaseStore, MergeRequest, MergeResponse } from '../store.js'
import { leaseKey, type Ledger } from '../../core/lease.js'
import { withLedgers } from './ledger-policies.js'
import { mergeRequestProblem } from '../merge-request.js'
import { findPolicy, Layouts, type Shape } from './layouts.js'
import { makeRoom } from './eviction.js'
import { KeyTable, type Scratch, sizeScratch } from './key-table.js'
import { createKernelStep, type KernelStep, resultOfStep, stepOfResult } from './kernel-step.js'
import { type MemoryStoreOptions, resolveMemoryStoreOptions } from './memory-store-options.js'

export type { MemoryStoreOptions } from './memory-store-options.js'

/**
 * An in-process `Store`: no I/O, no timers, answers synchronously. It offers `evaluateSync`, so a
 * limiter calls it without a promise or a timeout (neither can matter in-process), and
 * `limiter.limitSync` works on it. Every key's records are numbers in one typed array (see
 * KeyTable), not objects, so a key costs its Map entry, its string and a few words.
 */
export class MemoryStore implements LeaseStore {
  readonly maxKeys: number
  readonly maxBytes: number
  private readonly clock: () => number
  private readonly layouts = new Layouts()
  private readonly table: KeyTable
  // The request array seen last and its shape: a limiter passes the same array every time.
  private lastPolicies: readonly Policy[] | undefined
  private lastShape: Shape | undefined
  // Where `locate` answers besides the offset: the key's class and where the request's policies live.
  private foundGuarded = false
  // Where decideHeld and readCopies found the key's block (undefined: not held).
  private foundAt: number | undefined
  private foundIndex: readonly number[] = []
  // evaluateKeyInto reads the records and keeps no reference, so one scratch serves every call.
  private readonly scratch: Scratch = { into: [], records: [], states: [] }
  // What evaluateSync answers with and evaluateOne decides into before copying the answer out.
  private readonly evaluation: KeyEvaluation & EvaluateResponse = { ...createEvaluation(), now: 0 }
  // What a kernel decides into (see decideInPlace).
  private readonly kernelStep: KernelStep = createKernelStep()

  constructor(options: MemoryStoreOptions = {}) {
    const { maxKeys, maxBytes, clock } = resolveMemoryStoreOptions(options)
    this.maxKeys = maxKeys
    this.maxBytes = maxBytes
    this.clock = clock
    this.table = new KeyTable(this.layouts, maxKeys, maxBytes)
  }

  /** How many keys are held now (expired ones included until they are touched or evicted). */
  get size(): number {
    return this.table.size
  }

  /** How many of them are protected from eviction by a flood (see MemoryStoreOptions.maxKeys). */
  get protectedSize(): number {
    return this.table.guarded.size
  }

  /** The bytes the held keys count for against maxBytes (an estimate, see MemoryStoreOptions.maxBytes). */
  get sizeBytes(): number {
    return this.table.bytes
  }

  /** Decides each request in order (one clock reading for the requests without `now`). */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    try {
      const out: EvaluateResponse[] = new Array(batch.length)
      let clockNow = -1
      for (let i = 0; i < batch.length; i++) {
        const request = batch[i]
        let now = request.now
        if (now === undefined) {
          if (clockNow < 0) clockNow = this.clock()
          now = clockNow
        }
        out[i] = this.evaluateOne(request.key, request.policies, request.cost, now)
      }
      return Promise.resolve(out)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * Decides one request synchronously (see `Store.evaluateSync`), allocating nothing: the answer
   * is the store's scratch object, valid until its next call.
   */
  evaluateSync(request: EvaluateRequest): EvaluateResponse {
    const { key, policies, cost } = request
    const now = request.now ?? this.clock()
    const out = this.evaluation
    const shape = policies === this.lastPolicies ? this.lastShape! : this.shapeOf(policies)
    if (this.decideHeld(key, shape, policies[0], cost, now) || this.decideRest(key, shape, policies, cost, now)) {
      if (out.results.length !== 1) sizeEvaluation(out, 1)
      out.allowed = resultOfStep(this.kernelStep, out.results[0])
    }
    out.now = now
    return out
  }

  /**
   * Decides a request of one policy synchronously, as `evaluateSync` does, and answers its one
   * result (which speaks for the decision: a set of one is allowed exactly when its policy is): the
   * store's own object, valid until its next call. The limiter's direct path asks this.
   */
  decideOne(key: string, policies: readonly Policy[], cost: number): PolicyResult {
    const now = this.clock()
    const shape = policies === this.lastPolicies ? this.lastShape! : this.shapeOf(policies)
    const step = this.kernelStep
    // The general path's one result is copied, so that the caller reads one shape of object.
    if (!this.decideHeld(key, shape, policies[0], cost, now) && !this.decideRest(key, shape, policies, cost, now)) {
      stepOfResult(this.evaluation.results[0], step)
    } else {
      step.blocked = false
    }
    return step
  }

  /**
   * The usual request, decided by its kernel with the fewest looks: a key of the request's own
   * layout (its word is `shape.kernelWord`: no block deadline either) whose state keeps its words.
   * True when decided (the answer in `kernelStep`, the key placed); false, having written nothing,
   * for the rest (decideRest), with `foundAt` and `foundGuarded` saying where the key is.
   */
  private decideHeld(key: string, shape: Shape, policy: Policy, cost: number, now: number): boolean {
    const table = this.table
    let guarded = false
    let at = table.open.get(key)
    if (at === undefined) {
      at = table.guarded.get(key)
      guarded = true
    }
    this.foundAt = at
    this.foundGuarded = guarded
    if (at === undefined) return false
    const { f64, u32 } = table.slab
    if (u32[2 * at + 1] !== shape.kernelWord) return false
    const base = at + shape.kernelAt
    // A state kept aside (its first word NaN, its second an index) is read by the general path.
    if (Number.isNaN(f64[base + 1]) && f64[base + 2] >= 0) return false
    const step = this.kernelStep
    if (!shape.kernel!(f64, base, now, cost, policy, step)) return false
    const restricted = !step.allowed || step.remaining < shape.kernelProtectBelow
    if (table.due(at, guarded, restricted)) table.place(key, at, guarded, restricted)
    return true
  }

  /**
   * What decideHeld left: the key's layout made to cover the request (see `settle`), then its
   * kernel when it can (true: the answer in `kernelStep`), else the general path (false: the
   * answer in `evaluation`). A method of its own, as evaluateGeneral, so that the compiler spends
   * its inlining budget on decideHeld in the callers that inline evaluateSync or decideOne.
   */
  private decideRest(key: string, shape: Shape, policies: readonly Policy[], cost: number, now: number): boolean {
    let at = this.foundAt
    if (at !== undefined) at = this.settle(key, at, this.foundGuarded, shape, now)
    if (at !== undefined && shape.kernel !== undefined && this.decideInPlace(key, at, shape, policies[0], cost, now)) return true
    this.evaluateGeneral(key, at, shape, policies, cost, now)
    return false
  }

  /**
   * evaluateSync's all-or-nothing path (core/evaluate.ts), for what no kernel decides: a method of
   * its own, so that the compiler spends its inlining budget on the kernel path of the callers
   * that inline evaluateSync (the limiter's direct path), not on this colder one.
   */
  private evaluateGeneral(key: string, at: number | undefined, shape: Shape, policies: readonly Policy[], cost: number, now: number): void {
    const scratch = this.scratch
    if (scratch.into.length !== policies.length) sizeScratch(scratch, policies.length)
    // A loop, not into.fill(undefined): fill is a call into the runtime, dear for an array of one or two.
    if (at === undefined) for (let i = 0; i < scratch.into.length; i++) scratch.into[i] = undefined
    else this.table.read(at, this.foundIndex, now, scratch)
    const evaluation = evaluateKeyInto(scratch.into, now, cost, policies, this.evaluation)
    if (at !== undefined) this.keep(key, at, shape, evaluation, now)
    // A peek or a refund of an unknown key leaves nothing worth keeping: its state is fresh.
    else if (cost > 0) this.table.insert(key, shape, evaluation, now)
  }

  /**
   * Decides one request synchronously. Same meaning as one element of `evaluate`; `now` defaults
   * to the store's clock. The answer is the caller's to keep.
   */
  evaluateOne(key: string, policies: readonly Policy[], cost: number, now: number = this.clock()): EvaluateResponse {
    const evaluation = this.evaluateSync({ key, policies, cost, now })
    const results: PolicyResult[] = new Array(evaluation.results.length)
    for (let i = 0; i < results.length; i++) results[i] = { ...evaluation.results[i] }
    return { allowed: evaluation.allowed, results, now }
  }

  /** Merges each request's units into its key's records (see Store.merge), in order; answers copies. */
  merge(batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    try {
      const out: MergeResponse[] = new Array(batch.length)
      for (let i = 0; i < batch.length; i++) out[i] = this.mergeOne(batch[i])
      return Promise.resolve(out)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** One merge, synchronously (see Store.merge); `now` defaults to the request's, then the store's clock. */
  mergeOne(request: MergeRequest, now: number = request.now ?? this.clock()): MergeResponse {
    const problem = mergeRequestProblem(request)
    if (problem !== undefined) throw new FloodgateError('INVALID_REQUEST', problem)
    const { key, policies, units, origin, seq } = request
    const table = this.table
    const shape = this.shapeOf(policies)
    const live = this.readCopies(key, shape, now)
    const at = this.foundAt
    const applied = live.map(
      (record, i) =>
        origin === undefined || record === undefined || !table.origins.seenBefore(table.recordAt(at!, this.foundIndex[i]), origin, seq!),
    )
    const merged = mergeKey(
      live,
      now,
      applied.map((yes) => (yes ? units : 0)),
      policies,
    )
    // What keep/insert read besides the records: each policy's remaining, to judge protection.
    const results = merged.records.map((record, i) => ({
      ...ALGORITHM_BY_NAME[policies[i].algorithm].step(record.state, now, 0, policies[i]),
      blocked: false,
    }))
    const evaluation: KeyEvaluation = { allowed: true, results, records: merged.records, ttlMs: merged.ttlMs }
    if (at !== undefined) this.keep(key, at, shape, evaluation, now)
    else if (units !== 0) table.insert(key, shape, evaluation, now)
    const kept = this.locate(key, shape, now)
    if (kept !== undefined) {
      for (let i = 0; i < policies.length; i++) {
        const base = table.recordAt(kept, this.foundIndex[i])
        // A record that had expired starts with no origins, as its Redis key would.
        if (live[i] === undefined) table.origins.delete(base)
        if (origin !== undefined && applied[i] && units !== 0) table.origins.markSeen(base, origin, seq!)
      }
    }
    const records = merged.records.map((record) => ({ blockedUntil: record.blockedUntil, state: record.state?.slice() }))
    return { records, applied: applied.every(Boolean), now }
  }

  /** Runs each lease call (see core/lease.ts) on the key's records and ledgers, one after another. */
  lease(batch: readonly LeaseRequest[]): Promise<LeaseResponse[]> {
    try {
      const clockNow = this.clock()
      return Promise.resolve(batch.map((request) => this.leaseOne(request, request.now ?? clockNow)))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * One lease call, synchronously. A lease key keeps its ledgers as records of their own, one per
   * policy (see ledger-policies.ts), so eviction, expiry and byte accounting treat them alike.
   */
  leaseOne(request: LeaseRequest, now: number = this.clock()): LeaseResponse {
    const { key, policies } = request
    const both = withLedgers(policies)
    const shape = this.shapeOf(both)
    const read = this.readCopies(key, shape, now)
    const at = this.foundAt
    const count = policies.length
    const ledgers = read.slice(count).map((record) => record?.state as Ledger | undefined)
    const lease = leaseKey(read.slice(0, count), ledgers, now, request, policies)
    const evaluation: KeyEvaluation = {
      allowed: lease.allowed,
      results: [...lease.results, ...lease.results],
      records: lease.records,
      ttlMs: lease.ttlMs,
    }
    if (at !== undefined) this.keep(key, at, shape, evaluation, now)
    else if (lease.records.some((record) => record.state !== undefined)) this.table.insert(key, shape, evaluation, now)
    return {
      granted: lease.granted,
      expiresAt: lease.expiresAt,
      returned: lease.returned,
      allowed: lease.allowed,
      results: lease.results,
      now,
    }
  }

  /** Forgets the key's records of these policies (matched by name and algorithm); the key goes when none is left. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    const table = this.table
    let guarded = false
    let at = table.open.get(key)
    if (at === undefined) {
      at = table.guarded.get(key)
      guarded = at !== undefined
    }
    if (at !== undefined) {
      const held = table.layoutAt(at).policies
      for (const policy of withLedgers(policies)) {
        const i = findPolicy(held, policy)
        if (i >= 0) table.dropRecord(at, i)
      }
      if (!table.holdsRecords(at)) table.remove(key, at, guarded)
      // What is left was restricted alongside what was reset; it is judged again when next used.
      else if (guarded) table.unprotect(key, at)
    }
    return Promise.resolve()
  }

  /** Forgets every key: nothing else to release, the store owns no timers or connections. */
  close(): Promise<void> {
    this.table.clear()
    return Promise.resolve()
  }

  private shapeOf(policies: readonly Policy[]): Shape {
    const shape = this.layouts.shapeOf(policies)
    this.lastPolicies = policies
    this.lastShape = shape
    return shape
  }

  /**
   * The offset of the key's block, its layout made to cover the request's policies (see
   * KeyTable.adopt), or undefined for a key not held; `foundGuarded` and `foundIndex` say the rest.
   */
  private locate(key: string, shape: Shape, now: number): number | undefined {
    const table = this.table
    let guarded = false
    let at = table.open.get(key)
    if (at === undefined) {
      at = table.guarded.get(key)
      if (at === undefined) return undefined
      guarded = true
    }
    this.foundGuarded = guarded
    return this.settle(key, at, guarded, shape, now)
  }

  // locate's second half, for a key found at `at`: its layout made to cover the request's policies.
  private settle(key: string, at: number, guarded: boolean, shape: Shape, now: number): number {
    const table = this.table
    if (table.layoutAt(at) === shape.layout) {
      this.foundIndex = shape.index
      return at
    }
    at = table.adopt(key, at, guarded, shape, now)
    this.foundIndex = table.adoptedIndex
    return at
  }

  // The slower paths (merge, lease) read records of their own, which the core may hand back.
  private readCopies(key: string, shape: Shape, now: number): (PolicyRecord | undefined)[] {
    const count = shape.index.length
    const at = this.locate(key, shape, now)
    this.foundAt = at
    if (at === undefined) return new Array(count).fill(undefined)
    const scratch = this.scratch
    sizeScratch(scratch, count)
    this.table.read(at, this.foundIndex, now, scratch)
    return scratch.into.map((record) =>
      record === undefined ? undefined : { blockedUntil: record.blockedUntil, state: record.state?.slice() },
    )
  }

  /**
   * The common request, decided on the key's words themselves by its algorithm's kernel (generated
   * from the same definition as the step: kernels/): one policy, a held key whose record keeps its
   * state in its words (or none) and no block deadline. Charges, peeks, refunds, denials and lapsed
   * records alike; false before anything is written for the rest (a block deadline, a state kept
   * aside, a denial that starts a block), which the general path decides. The answer is left in
   * `kernelStep`, and the key is placed as keep would place it.
   */
  private decideInPlace(key: string, at: number, shape: Shape, policy: Policy, cost: number, now: number): boolean {
    const table = this.table
    const base = table.kernelRecordAt(at, this.foundIndex[0])
    if (base < 0) return false
    const step = this.kernelStep
    if (!shape.kernel!(table.slab.f64, base, now, cost, policy, step)) return false
    table.place(key, at, this.foundGuarded, !step.allowed || step.remaining < shape.protectBelow[0])
    return true
  }

  // Stores a decision's records for a held key, places it in its class and keeps maxBytes.
  private keep(key: string, at: number, shape: Shape, evaluation: KeyEvaluation, now: number): void {
    const table = this.table
    const bytes = table.bytes
    table.place(key, at, this.foundGuarded, table.write(at, this.foundIndex, evaluation, now, shape.protectBelow))
    if (table.bytes > bytes && table.bytes > table.maxBytes) makeRoom(table, at, now)
  }
}
