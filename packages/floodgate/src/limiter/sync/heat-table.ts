// The heat of the keys `auto` follows: a decaying decision rate per key, in flat arrays by slot.

// How many slots one eviction looks at for a cold key past the hand: bounds its cost.
const EVICTION_PROBES = 16
const FIRST_CAPACITY = 1024
// A slot's fields, side by side in one array (a decision reads them all, so from one cache line
// rather than one per field): its rate, when it was read, its stamp (see stampOf) and its hot bit.
const RATE = 0
const AT = 1
const STAMP = 2
const HOT = 3
const FIELDS = 4

/** What owns a followed key: its map of key to slot, and how its keys' heat is read. */
export interface HeatOwner {
  readonly keys: Map<string, number>
  /** The time constant of its keys' rates (ms): a steady stream's rate is read within a few of these. */
  readonly windowMs: number
  /** Below this rate (decisions per ms) a key may be forgotten to make room for another. */
  readonly keepPerMs: number
}

/**
 * Up to `maxKeys` keys, each in a slot of typed arrays: a key seen once costs an entry in its
 * owner's map and nothing on the heap besides (the Zipf tail of a busy limiter is mostly such keys).
 * Past `maxKeys` a clock hand goes round the slots in the order they were taken: the first slot it
 * meets whose rate is below its owner's `keepPerMs` is taken over; hot and warming ones
 * are passed (they come round last again, as if moved to the back). When the `EVICTION_PROBES`
 * slots it looks at are all that warm, the next one goes anyway: memory is bounded. Walking slots,
 * not a Map's insertion order, keeps an eviction at a few array reads (a Map iterated from its
 * start walks the holes its deletions left).
 */
export class HeatTable<Owner extends HeatOwner> {
  // The slots' fields (FIELDS a slot).
  private cells: Float64Array
  // Adds so far: a slot's stamp.
  private adds = 0
  private readonly keyOf: string[] = []
  private readonly ownerOf: Owner[] = []
  private used = 0
  private hand = 0

  constructor(
    private readonly maxKeys: number,
    // Told of a hot key that is forgotten (its lease is to be given back).
    private readonly forgotHot: (key: string, owner: Owner) => void,
  ) {
    const capacity = Math.min(maxKeys, FIRST_CAPACITY)
    this.cells = new Float64Array(capacity * FIELDS)
  }

  /** Keys followed. */
  get size(): number {
    return this.used
  }

  /** Keys followed that are hot (walks the slots: at most `maxKeys`). */
  hotCount(): number {
    let hot = 0
    for (let slot = 0; slot < this.used; slot++) hot += this.cells[slot * FIELDS + HOT]
    return hot
  }

  /** Follows `key` of `owner` from `now` (no decision counted yet), returning its slot. */
  add(key: string, owner: Owner, now: number): number {
    let slot: number
    if (this.used < this.maxKeys) {
      if (this.used * FIELDS === this.cells.length) this.grow()
      slot = this.used++
    } else {
      slot = this.evict(now)
    }
    this.keyOf[slot] = key
    this.ownerOf[slot] = owner
    const cell = slot * FIELDS
    this.cells[cell + RATE] = 0
    this.cells[cell + AT] = now
    this.cells[cell + HOT] = 0
    this.cells[cell + STAMP] = ++this.adds
    owner.keys.set(key, slot)
    return slot
  }

  /**
   * Which following of a key `slot` holds (the count of adds when it was taken): a slot remembered
   * elsewhere is still that key's while its stamp is unchanged.
   */
  stampOf(slot: number): number {
    return this.cells[slot * FIELDS + STAMP]
  }

  /**
   * Counts one decision of `slot` at `now` and returns its rate (decisions per ms). `windowMs` is its
   * owner's (a caller that has the owner at hand passes it, sparing a read of `ownerOf`).
   */
  count(slot: number, now: number, windowMs = this.ownerOf[slot].windowMs): number {
    // A stream of r decisions per ms adds r·dt/windowMs and keeps exp(-dt/windowMs): the fixed point is r.
    return (this.cells[slot * FIELDS + RATE] = this.rateAt(slot, now, windowMs) + 1 / windowMs)
  }

  isHot(slot: number): boolean {
    return this.cells[slot * FIELDS + HOT] === 1
  }

  setHot(slot: number, hot: boolean): void {
    this.cells[slot * FIELDS + HOT] = hot ? 1 : 0
  }

  private rateAt(slot: number, now: number, windowMs: number): number {
    const cell = slot * FIELDS
    const at = this.cells[cell + AT]
    if (now <= at) return this.cells[cell + RATE]
    this.cells[cell + AT] = now
    return (this.cells[cell + RATE] *= Math.exp(-(now - at) / windowMs))
  }

  // Frees a slot past the hand (see the class comment) and returns it.
  private evict(now: number): number {
    for (let probes = 0; probes < EVICTION_PROBES; probes++) {
      const slot = this.advance()
      const owner = this.ownerOf[slot]
      if (this.rateAt(slot, now, owner.windowMs) < owner.keepPerMs) return this.forget(slot)
    }
    return this.forget(this.advance())
  }

  private advance(): number {
    const slot = this.hand
    this.hand = slot + 1 === this.used ? 0 : slot + 1
    return slot
  }

  private forget(slot: number): number {
    const key = this.keyOf[slot]
    const owner = this.ownerOf[slot]
    owner.keys.delete(key)
    if (this.isHot(slot)) {
      this.setHot(slot, false)
      this.forgotHot(key, owner)
    }
    return slot
  }

  private grow(): void {
    const cells = new Float64Array(Math.min(this.maxKeys, (this.cells.length / FIELDS) * 2) * FIELDS)
    cells.set(this.cells)
    this.cells = cells
  }
}
