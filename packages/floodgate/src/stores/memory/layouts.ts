// How a key's block in the slab is laid out for the policies whose records it holds, and how a
// request's policies find their records in it.

import { ALGORITHM_BY_NAME } from '../../core/algorithms/index.js'
import type { AlgorithmName, Policy } from '../../core/policy.js'
import { isLedgerPolicy } from './ledger-policies.js'
import { KERNELS } from './kernels/index.js'
import type { Kernel } from './kernel-step.js'

// The state numbers a record keeps in its block, per algorithm: the length of the state its steps
// always write. Only memory depends on it: a state of another length is kept aside (see KeyTable),
// so a wrong entry costs bytes, never a decision. States that grow with use (a log, leases in
// flight) keep one pair in the block, which is all a sparse client has. Every record has two state
// words at least: the second says where a state kept aside is. Lease ledgers are always aside.
const INLINE_STATE: Readonly<Record<AlgorithmName, number>> = {
  'fixed-window': 2,
  'sliding-window': 3,
  'token-bucket': 2,
  'leaky-bucket': 3,
  gcra: 3,
  'sliding-log': 2,
  concurrency: 2,
}

// Algorithms whose state grows with use: their records are never decided in place (see
// KeyTable.kernelRecordAt), as their state soon leaves its words for an array aside.
const GROWING_STATE: ReadonlySet<AlgorithmName> = new Set(['sliding-log', 'concurrency'])

/** Words of a block before its records: the LRU move stamp, and the layout id times 2 plus a flag for block deadlines, 32 bits each. */
export const META_WORDS = 1
/** Words of a record before its state: expiresAt (its block deadline, rarely set, is kept aside). */
export const RECORD_WORDS = 1

/**
 * The records a key's block holds, one per policy identity (name, algorithm and leaky-bucket form,
 * as the Redis key layout has them), so that two policy sets that share a policy share its record.
 * A record at word `at[i]` of the block is `[expiresAt, ...state]` with `inline[i]` (≥ 2)
 * state numbers: expiresAt NaN when there is no record, and a first state number NaN when the
 * state is undefined or kept aside.
 */
export interface Layout {
  readonly id: number
  /** One per record (any policy of that identity stands for it). */
  readonly policies: readonly Policy[]
  readonly at: readonly number[]
  readonly inline: readonly number[]
  /** Per record, whether its state always has `inline[i]` numbers (no log, no ledger). */
  readonly fixed: readonly boolean[]
  readonly words: number
  /** Per request shape whose layout is another one, where its policies live in this one. */
  readonly indexes: WeakMap<Shape, readonly number[]>
}

/** A request's policy array as the store sees it, worked out once per array. */
export interface Shape {
  /** The layout of a key created by this request. */
  readonly layout: Layout
  /** Per request policy, its record in `layout` (the identity, unless a policy repeats). */
  readonly index: readonly number[]
  /** Per request policy, the remaining units below which the key is protected (see protectBelowOf). */
  readonly protectBelow: readonly number[]
  /**
   * A request of one policy whose algorithm has a kernel (kernels/, generated from its definition)
   * keeping exactly its record's state words: the kernel that decides it in place. Sets of several
   * policies stay on the general all-or-nothing path.
   */
  readonly kernel: Kernel | undefined
  /**
   * With a kernel: the layout word (see META_WORDS) of a key created by this request and holding
   * no block deadline, and the offset of the policy's record in its block. A key whose word is this
   * one is decided by the kernel at that offset with no further look (-1 without a kernel: no word
   * is negative).
   */
  readonly kernelWord: number
  readonly kernelAt: number
  /** With a kernel: `protectBelow[0]`, read without the array. */
  readonly kernelProtectBelow: number
}

/** The layouts of one store, by id and by the identities they hold, and the shapes of request arrays. */
export class Layouts {
  private readonly byIdentities = new Map<string, Layout>()
  readonly byId: Layout[] = []
  private readonly shapes = new WeakMap<readonly Policy[], Shape>()
  /** The kernels shapes take, by algorithm (the tests empty it to hold a store to the general path). */
  kernels: Readonly<Partial<Record<AlgorithmName, { readonly decide: Kernel; readonly words: number }>>> = KERNELS

  /** The shape of a request's policy array (cached per array: limiters pass the same one each time). */
  shapeOf(policies: readonly Policy[]): Shape {
    let shape = this.shapes.get(policies)
    if (shape === undefined) {
      const distinct: Policy[] = []
      const index = policies.map((policy) => {
        let at = findPolicy(distinct, policy)
        if (at < 0) at = distinct.push(policy) - 1
        return at
      })
      const layout = this.layoutOf(distinct)
      const kernel = this.kernelOf(policies, layout)
      const protectBelow = protectBelowOf(policies)
      shape = {
        layout,
        index,
        protectBelow,
        kernel,
        kernelWord: kernel === undefined ? -1 : layout.id << 1,
        kernelAt: layout.at[index[0]],
        kernelProtectBelow: protectBelow[0],
      }
      this.shapes.set(policies, shape)
    }
    return shape
  }

  // A set of one policy whose algorithm's kernel keeps exactly the record's state words.
  private kernelOf(policies: readonly Policy[], layout: Layout): Kernel | undefined {
    if (policies.length !== 1 || !layout.fixed[0]) return undefined
    const kernel = this.kernels[policies[0].algorithm]
    return kernel !== undefined && kernel.words === layout.inline[0] ? kernel.decide : undefined
  }

  /** The layout holding records for exactly these (distinct) identities, in this order. */
  layoutOf(policies: readonly Policy[]): Layout {
    const name = policies.map(identity).join('\u0001')
    let layout = this.byIdentities.get(name)
    if (layout === undefined) {
      const at: number[] = []
      const inline: number[] = []
      const fixed: boolean[] = []
      let words = META_WORDS
      for (const policy of policies) {
        at.push(words)
        const length = isLedgerPolicy(policy) ? 2 : INLINE_STATE[policy.algorithm]
        inline.push(length)
        fixed.push(!isLedgerPolicy(policy) && !GROWING_STATE.has(policy.algorithm))
        words += RECORD_WORDS + length
      }
      layout = { id: this.byId.length, policies: policies.slice(), at, inline, fixed, words, indexes: new WeakMap() }
      this.byId.push(layout)
      this.byIdentities.set(name, layout)
    }
    return layout
  }
}

function identity(policy: Policy): string {
  return `${policy.name}\u0000${policy.algorithm}\u0000${policy.shaping}`
}

/** Where a policy's record lives: same name, algorithm and (leaky-bucket) form, as the Redis key has them. */
export function findPolicy(policies: readonly Policy[], policy: Policy): number {
  for (let i = 0; i < policies.length; i++) {
    const other = policies[i]
    if (other.name === policy.name && other.algorithm === policy.algorithm && other.shaping === policy.shaping) return i
  }
  return -1
}

// Per policy, the remaining units below which a key has used more than half of what it may spend:
// a fresh key's capacity is asked of the algorithm itself (its peek: burst for buckets, limit for
// windows); a counter whose limit is compared outside the store is judged by its nominalLimit.
function protectBelowOf(policies: readonly Policy[]): readonly number[] {
  return policies.map((policy) => {
    const capacity = ALGORITHM_BY_NAME[policy.algorithm].step(undefined, 0, 0, policy).remaining
    return capacity - (policy.nominalLimit ?? capacity) / 2
  })
}
