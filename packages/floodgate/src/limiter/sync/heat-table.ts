// The heat of the keys `auto` follows: a decaying decision rate per key, in flat arrays by slot.

// How many slots one eviction looks at for a cold key past the hand: bounds its cost.
const EVICTION_PROBES = 16
const FIRST_CAPACITY = 1024

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
  private rate: Float64Array
  private at: Float64Array
  private hot: Uint8Array
  // Per slot, which following of a key it holds (the count of adds when it was taken): a slot
  // remembered elsewhere is still that key's while its stamp is unchanged.
  private stamps: Float64Array
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
    this.rate = new Float64Array(capacity)
    this.at = new Float64Array(capacity)
    this.hot = new Uint8Array(capacity)
    this.stamps = new Float64Array(capacity)
  }

  /** Keys followed. */
  get size(): number {
    return this.used
  }

  /** Keys followed that are hot (walks the slots: at most `maxKeys`). */
  hotCount(): number {
    let hot = 0
    for (let slot = 0; slot < this.used; slot++) hot += this.hot[slot]
    return hot
  }

  /** Follows `key` of `owner` from `now` (no decision counted yet), returning its slot. */
  add(key: string, owner: Owner, now: number): number {
    let slot: number
    if (this.used < this.maxKeys) {
      if (this.used === this.rate.length) this.grow()
      slot = this.used++
    } else {
      slot = this.evict(now)
    }
    this.keyOf[slot] = key
    this.ownerOf[slot] = owner
    this.rate[slot] = 0
    this.at[slot] = now
    this.hot[slot] = 0
    this.stamps[slot] = ++this.adds
    owner.keys.set(key, slot)
    return slot
  }

  /** The stamp of `slot`'s following now (changes when the slot is taken over). */
  stampOf(slot: number): number {
    return this.stamps[slot]
  }

  /** Counts one decision of `slot` at `now` and returns its rate (decisions per ms). */
  count(slot: number, now: number): number {
    // A stream of r decisions per ms adds r·dt/windowMs and keeps exp(-dt/windowMs): the fixed point is r.
    return (this.rate[slot] = this.rateAt(slot, now) + 1 / this.ownerOf[slot].windowMs)
  }

  isHot(slot: number): boolean {
    return this.hot[slot] === 1
  }

  setHot(slot: number, hot: boolean): void {
    this.hot[slot] = hot ? 1 : 0
  }

  private rateAt(slot: number, now: number): number {
    const at = this.at[slot]
    if (now <= at) return this.rate[slot]
    this.at[slot] = now
    return (this.rate[slot] *= Math.exp(-(now - at) / this.ownerOf[slot].windowMs))
  }

  // Frees a slot past the hand (see the class comment) and returns it.
  private evict(now: number): number {
    for (let probes = 0; probes < EVICTION_PROBES; probes++) {
      const slot = this.advance()
      if (this.rateAt(slot, now) < this.ownerOf[slot].keepPerMs) return this.forget(slot)
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
    if (this.hot[slot] === 1) {
      this.hot[slot] = 0
      this.forgotHot(key, owner)
    }
    return slot
  }

  private grow(): void {
    const capacity = Math.min(this.maxKeys, this.rate.length * 2)
    const rate = new Float64Array(capacity)
    const at = new Float64Array(capacity)
    const hot = new Uint8Array(capacity)
    const stamps = new Float64Array(capacity)
    rate.set(this.rate)
    at.set(this.at)
    hot.set(this.hot)
    stamps.set(this.stamps)
    this.rate = rate
    this.at = at
    this.hot = hot
    this.stamps = stamps
  }
}
