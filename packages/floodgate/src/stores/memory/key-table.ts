// The embedded store's keys: each key's records in a block of a slab, the key itself in one of two
// LRU Maps (open, protected) whose value is the block's offset, and the accounting behind maxKeys
// and maxBytes. The MemoryStore decides; this table reads, writes, places and evicts.

import type { KeyEvaluation } from '../../core/evaluate.js'
import { copyState } from '../../core/algorithms/types.js'
import type { Policy } from '../../core/policy.js'
import { findPolicy, type Layout, type Layouts, RECORD_WORDS, type Shape } from './layouts.js'
import { OldestCursor } from './oldest-cursor.js'
import { Slab } from './slab.js'
import { makeRoom } from './eviction.js'
import { MergeOrigins } from './merge-origins.js'
import type { Scratch } from './scratch.js'
import { Asides } from './asides.js'

export { type Scratch, sizeScratch } from './scratch.js'

// The accounting behind maxBytes, near what V8 and the slab use: per key its Map entry and block
// header, per character of the key, per word of its block, and per state kept aside its array.
export const ENTRY_BYTES = 48
export const BYTES_PER_CHARACTER = 2
export const BYTES_PER_WORD = 8
export const ASIDE_BYTES = 96

export class KeyTable {
  // Two classes of keys (see MemoryStoreOptions.maxKeys), each a Map in LRU order: a Map iterates in
  // insertion order, so deleting and re-inserting a key on a touch makes the first key the least
  // recently used one, an O(1) LRU without a linked list. Moving costs a delete and an insert
  // (several times a lookup), so a key moves only when more than maxKeys/2 moves happened since
  // its last one (the stamp in its block): a hot working set smaller than that never moves at all.
  readonly open = new Map<string, number>()
  readonly guarded = new Map<string, number>()
  // The least recently used key of each class, for eviction (eviction.ts).
  readonly openOldest = new OldestCursor(this.open)
  readonly guardedOldest = new OldestCursor(this.guarded)
  readonly slab = new Slab()
  // States that do not fit their record's words (see Layout): the record's first state word is NaN
  // and its second holds the index of the state's array here (-1 for an undefined state).
  private readonly asides = new Asides()
  // Block deadlines (rare: only a denial with blockMs sets one), by the offset of their record's
  // first word; a key holding any has the low bit of its layout word set.
  private readonly blocks = new Map<number, number>()
  /** Merges only (Store.merge): the seqs each record applied, kept as long as the record. */
  readonly origins = new MergeOrigins()
  private readonly moveDistance: number
  // The stamp of the latest move, 32 bits wide and compared modulo 2^32 (see place).
  private moves = 0
  bytes = 0
  /** After `adopt`: where the request's policies live in the key's new layout. */
  adoptedIndex: readonly number[] = []

  constructor(
    private readonly layouts: Layouts,
    readonly maxKeys: number,
    readonly maxBytes: number,
  ) {
    this.moveDistance = maxKeys >>> 1
  }

  get size(): number {
    return this.open.size + this.guarded.size
  }

  /** The layout of the key whose block is at `at`. */
  layoutAt(at: number): Layout {
    return this.layouts.byId[this.slab.u32[2 * at + 1] >>> 1]
  }

  /**
   * Fills `scratch.into[i]` with the live record of the key's policy `index[i]`, or undefined: a
   * record read at `now >= expiresAt` is absent, the rule the Redis equivalence test mirrors (PEXPIRE
   * drops a key at that moment), and no timer runs. The records and inline states are the scratch's
   * objects, rewritten on every call; a state kept aside is the table's own array. Only read them.
   */
  read(at: number, index: readonly number[], now: number, scratch: Scratch): void {
    const f64 = this.slab.f64
    const word = this.slab.u32[2 * at + 1]
    const layout = this.layouts.byId[word >>> 1]
    const blocked = (word & 1) === 1
    const { into, records, states } = scratch
    for (let i = 0; i < index.length; i++) {
      const base = at + layout.at[index[i]]
      if (!(now < f64[base])) {
        into[i] = undefined
        continue
      }
      const record = records[i]
      record.blockedUntil = blocked ? (this.blocks.get(base) ?? 0) : 0
      const inline = layout.inline[index[i]]
      if (!Number.isNaN(f64[base + 1])) {
        const state = states[i]
        for (let k = 0; k < inline; k++) state[k] = f64[base + 1 + k]
        if (state.length !== inline) state.length = inline
        record.state = state
      } else {
        const ref = f64[base + 2]
        record.state = ref >= 0 ? this.asides.get(ref) : undefined
      }
      into[i] = record
    }
  }

  /**
   * The offset of the record of the key's policy `i` when a kernel may decide it in place: its
   * state never grows (see Layout.fixed), is not kept aside (its words hold it, or NaN for none)
   * and the key has no block deadline; else -1.
   */
  kernelRecordAt(at: number, i: number): number {
    const word = this.slab.u32[2 * at + 1]
    if ((word & 1) === 1) return -1
    const layout = this.layouts.byId[word >>> 1]
    if (!layout.fixed[i]) return -1
    const base = at + layout.at[i]
    const f64 = this.slab.f64
    if (Number.isNaN(f64[base + 1]) && f64[base + 2] >= 0) return -1
    return base
  }

  /**
   * Stores an evaluation's records in the key's block (`index` as for read) and answers whether the
   * key is now to be protected: denied, or below `protectBelow` in a policy.
   */
  write(at: number, index: readonly number[], evaluation: KeyEvaluation, now: number, protectBelow: readonly number[]): boolean {
    const { records, ttlMs, results } = evaluation
    const word = this.slab.u32[2 * at + 1]
    const layout = this.layouts.byId[word >>> 1]
    const f64 = this.slab.f64
    let restricted = !evaluation.allowed
    for (let i = 0; i < index.length; i++) {
      const base = at + layout.at[index[i]]
      const next = records[i]
      f64[base] = now + ttlMs[i]
      if (next.blockedUntil !== 0 || (word & 1) === 1) this.block(at, base, next.blockedUntil)
      const state = next.state
      const inline = layout.inline[index[i]]
      if (state !== undefined && state.length === inline) {
        if (Number.isNaN(f64[base + 1])) this.dropAside(base)
        for (let k = 0; k < inline; k++) f64[base + 1 + k] = state[k]
      } else if (state === undefined) {
        this.dropAside(base)
        f64[base + 1] = Number.NaN
        f64[base + 2] = -1
      } else {
        this.keepAside(base, state)
      }
      if (results[i].remaining < protectBelow[i]) restricted = true
    }
    return restricted
  }

  // Sets or clears the block deadline of the record at `base`, and the key's flag with it.
  private block(at: number, base: number, blockedUntil: number): void {
    const u32 = this.slab.u32
    if (blockedUntil !== 0) {
      this.blocks.set(base, blockedUntil)
      u32[2 * at + 1] |= 1
      return
    }
    if (!this.blocks.delete(base)) return
    const layout = this.layoutAt(at)
    for (let i = 0; i < layout.at.length; i++) if (this.blocks.has(at + layout.at[i])) return
    u32[2 * at + 1] &= ~1
  }

  // A state that does not fit its record's words: copied into the table's own array for it.
  private keepAside(base: number, state: readonly number[]): void {
    const f64 = this.slab.f64
    const ref = f64[base + 2]
    if (Number.isNaN(f64[base + 1]) && ref >= 0) {
      const held = this.asides.get(ref)
      if (held === state) return
      this.bytes += (state.length - held.length) * BYTES_PER_WORD
      copyState(held, state)
      return
    }
    f64[base + 1] = Number.NaN
    f64[base + 2] = this.asides.add(state)
    this.bytes += ASIDE_BYTES + state.length * BYTES_PER_WORD
  }

  // Frees the state the record at `base` keeps aside, if it has one (its words then say none).
  private dropAside(base: number): void {
    const f64 = this.slab.f64
    const ref = f64[base + 2]
    if (!Number.isNaN(f64[base + 1]) || !(ref >= 0)) return
    this.bytes -= ASIDE_BYTES + this.asides.drop(ref) * BYTES_PER_WORD
    f64[base + 2] = -1
  }

  /** Adds a key (not held) with an evaluation's records, within both bounds. */
  insert(key: string, shape: Shape, evaluation: KeyEvaluation, now: number): void {
    const layout = shape.layout
    const bytes = ENTRY_BYTES + key.length * BYTES_PER_CHARACTER + layout.words * BYTES_PER_WORD
    // Dead keys stay until their room is needed (makeRoom drops them first). Were each new key to
    // shed one at once, a key whose state lapses between its visits (a big limit, a sparse client)
    // would be gone by its next visit, and every visit would pay a Map delete and insert instead of
    // an update in place.
    const within = this.size < this.maxKeys && this.bytes + bytes <= this.maxBytes
    const at = this.slab.alloc(layout.words)
    this.clearBlock(at, layout)
    this.bytes += bytes
    const restricted = this.write(at, shape.index, evaluation, now, shape.protectBelow)
    ;(restricted ? this.guarded : this.open).set(key, at)
    if (!within || this.bytes > this.maxBytes) makeRoom(this, at, now)
  }

  // A block with the move stamp of a new key and no records.
  private clearBlock(at: number, layout: Layout): void {
    this.moves = (this.moves + 1) >>> 0
    this.slab.u32[2 * at] = this.moves
    this.slab.u32[2 * at + 1] = layout.id << 1
    const f64 = this.slab.f64
    for (let i = 0; i < layout.at.length; i++) {
      const base = at + layout.at[i]
      f64[base] = Number.NaN
      f64[base + 1] = Number.NaN
      f64[base + 2] = -1
    }
  }

  /**
   * Puts a used key in its class (`guarded`: where it was found), at the young end when it changed
   * class or is due a move (see `due`).
   */
  place(key: string, at: number, guarded: boolean, restricted: boolean): void {
    if (!this.due(at, guarded, restricted)) return
    this.leave(key, guarded)
    ;(restricted ? this.guarded : this.open).set(key, at)
    this.stamp(at)
  }

  /**
   * Whether `place` moves the key: it changes class, or maxKeys/2 moves happened since its last.
   * Stamps are compared modulo 2^32: a key untouched for 2^32 moves may then look recent and wait
   * for its next use to move, which costs LRU order, never a decision. Small, so that a caller's
   * compiled code holds it and calls `place` only when it has work.
   */
  due(at: number, guarded: boolean, restricted: boolean): boolean {
    return guarded !== restricted || (this.moves - this.slab.u32[2 * at]) >>> 0 > this.moveDistance
  }

  private stamp(at: number): void {
    this.moves = (this.moves + 1) >>> 0
    this.slab.u32[2 * at] = this.moves
  }

  // Deletes a key from its class and tells that class's cursor.
  private leave(key: string, guarded: boolean): void {
    if (guarded) {
      this.guarded.delete(key)
      this.guardedOldest.left(key)
    } else {
      this.open.delete(key)
      this.openOldest.left(key)
    }
  }

  /**
   * Gives a key whose layout is not the request's one that covers both: its records of other
   * policies stay unless absent or expired, the request's policies are appended, and the block
   * moves when the layout changes. Returns the block's offset; `adoptedIndex` says where the
   * request's policies live in it.
   */
  adopt(key: string, at: number, guarded: boolean, shape: Shape, now: number): number {
    const old = this.layoutAt(at)
    const f64 = this.slab.f64
    const wanted = shape.layout.policies
    const held: Policy[] = []
    const from: number[] = []
    for (let i = 0; i < old.policies.length; i++) {
      const base = at + old.at[i]
      if (!(now < f64[base]) && findPolicy(wanted, old.policies[i]) < 0) continue
      held.push(old.policies[i])
      from.push(i)
    }
    for (const policy of wanted) {
      if (findPolicy(held, policy) >= 0) continue
      held.push(policy)
      from.push(-1)
    }
    const layout = this.layouts.layoutOf(held)
    if (layout !== old) at = this.move(key, at, guarded, old, layout, from)
    let index = layout.indexes.get(shape)
    if (index === undefined) {
      index = shape.index.map((i) => findPolicy(layout.policies, wanted[i]))
      layout.indexes.set(shape, index)
    }
    this.adoptedIndex = index
    return at
  }

  // Copies a key's records into a block of another layout (`from[j]`: the old record of new record j).
  private move(key: string, at: number, guarded: boolean, old: Layout, layout: Layout, from: readonly number[]): number {
    const moved = this.slab.alloc(layout.words)
    const { f64, u32 } = this.slab
    this.clearBlock(moved, layout)
    u32[2 * moved] = u32[2 * at]
    u32[2 * moved + 1] = (layout.id << 1) | (u32[2 * at + 1] & 1)
    for (let j = 0; j < from.length; j++) {
      if (from[j] < 0) continue
      const source = at + old.at[from[j]]
      const target = moved + layout.at[j]
      for (let k = 0; k < RECORD_WORDS + layout.inline[j]; k++) f64[target + k] = f64[source + k]
      // A state kept aside now belongs to the new record.
      f64[source + 1] = 0
      this.rekey(source, target)
    }
    this.forget(at, old)
    this.slab.release(at, old.words)
    this.bytes += (layout.words - old.words) * BYTES_PER_WORD
    ;(guarded ? this.guarded : this.open).set(key, moved)
    ;(guarded ? this.guardedOldest : this.openOldest).changed(key, moved)
    return moved
  }

  // A record's side entries follow it to another word.
  private rekey(source: number, target: number): void {
    const blockedUntil = this.blocks.get(source)
    if (blockedUntil !== undefined) {
      this.blocks.delete(source)
      this.blocks.set(target, blockedUntil)
    }
    this.origins.move(source, target)
  }

  // Drops what a block keeps outside it (states aside, block deadlines, origins), as it is freed or moved.
  private forget(at: number, layout: Layout): void {
    const side = this.blocks.size > 0 || this.origins.size > 0
    for (let i = 0; i < layout.at.length; i++) {
      const base = at + layout.at[i]
      this.dropAside(base)
      if (!side) continue
      this.blocks.delete(base)
      this.origins.delete(base)
    }
  }

  /** The offset of the first word of the record at position `i` of the key's layout. */
  recordAt(at: number, i: number): number {
    return at + this.layoutAt(at).at[i]
  }

  /** Forgets the record at position `i` of the key's layout. */
  dropRecord(at: number, i: number): void {
    const layout = this.layoutAt(at)
    const f64 = this.slab.f64
    const base = at + layout.at[i]
    this.dropAside(base)
    f64[base] = Number.NaN
    f64[base + 1] = Number.NaN
    f64[base + 2] = -1
    this.block(at, base, 0)
    this.origins.delete(base)
  }

  /** Whether the key holds any record (expired ones included). */
  holdsRecords(at: number): boolean {
    const layout = this.layoutAt(at)
    const f64 = this.slab.f64
    for (let i = 0; i < layout.at.length; i++) {
      const expiresAt = f64[at + layout.at[i]]
      if (!Number.isNaN(expiresAt)) return true
    }
    return false
  }

  /** Moves a protected key to the open class (what is left of it is judged again when next used). */
  unprotect(key: string, at: number): void {
    this.leave(key, true)
    this.open.set(key, at)
    this.stamp(at)
  }

  /** Forgets a key and frees its block. */
  remove(key: string, at: number, guarded: boolean): void {
    const layout = this.layoutAt(at)
    this.leave(key, guarded)
    this.forget(at, layout)
    this.bytes -= ENTRY_BYTES + key.length * BYTES_PER_CHARACTER + layout.words * BYTES_PER_WORD
    this.slab.release(at, layout.words)
  }

  /** Forgets every key. */
  clear(): void {
    this.open.clear()
    this.guarded.clear()
    this.openOldest.clear()
    this.guardedOldest.clear()
    this.asides.clear()
    this.blocks.clear()
    this.origins.clear()
    this.slab.clear()
    this.bytes = 0
  }
}
