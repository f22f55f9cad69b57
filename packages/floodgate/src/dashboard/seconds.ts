// Fixed-size per-second history: counters and latency histograms in rings, advanced by the clock, never by a timer.

/** Upper bounds (ms) of the latency buckets: 10 µs growing by 25% a bucket to past 10 s; the last bucket is open. */
export const LATENCY_BOUNDS_MS: readonly number[] = Array.from({ length: 64 }, (_, i) => 0.01 * 1.25 ** i)

/**
 * Rings of `length` one-second slots. A slot is zeroed when the clock first enters its second
 * again, so an idle stretch costs nothing and the history is always the last `length` seconds.
 */
export class SecondRing {
  readonly length: number
  /** The second (floor(ms / 1000)) each slot holds. */
  readonly #secondOf: Float64Array
  readonly #counters: Float64Array[]
  readonly #latency: Uint32Array

  /** `latency`: also keep a latency histogram per second (64 counters a second). */
  constructor(length: number, counters: number, latency = false) {
    this.length = length
    this.#secondOf = new Float64Array(length).fill(-1)
    this.#counters = Array.from({ length: counters }, () => new Float64Array(length))
    this.#latency = new Uint32Array(latency ? length * LATENCY_BOUNDS_MS.length : 0)
  }

  /** Adds `value` to counter `counter` in the slot of second `second`. */
  add(counter: number, second: number, value: number): void {
    this.#counters[counter][this.#slot(second)] += value
  }

  /** Counts one latency sample in second `second`'s histogram. */
  observe(second: number, ms: number): void {
    const slot = this.#slot(second)
    this.#latency[slot * LATENCY_BOUNDS_MS.length + bucketOf(ms)]++
  }

  /** Counter `counter` over the `count` seconds ending before `end` (exclusive), oldest first; seconds never entered read 0. */
  series(counter: number, end: number, count: number): number[] {
    const out = new Array<number>(count)
    for (let i = 0; i < count; i++) {
      const second = end - count + i
      const slot = this.#slotIfHeld(second)
      out[i] = slot === -1 ? 0 : this.#counters[counter][slot]
    }
    return out
  }

  /** The `q` quantile (0–1) of the latency samples of seconds `[from, to)`, as its bucket's upper bound; null with no sample. */
  quantile(q: number, from: number, to: number): number | null {
    const merged = new Float64Array(LATENCY_BOUNDS_MS.length)
    let total = 0
    for (let second = from; second < to; second++) {
      const slot = this.#slotIfHeld(second)
      if (slot === -1) continue
      for (let b = 0; b < LATENCY_BOUNDS_MS.length; b++) {
        const n = this.#latency[slot * LATENCY_BOUNDS_MS.length + b]
        merged[b] += n
        total += n
      }
    }
    if (total === 0) return null
    const rank = Math.max(1, Math.ceil(q * total))
    let seen = 0
    for (let b = 0; b < merged.length; b++) {
      seen += merged[b]
      if (seen >= rank) return LATENCY_BOUNDS_MS[b]
    }
    return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]
  }

  /** Latency samples in seconds `[from, to)`. */
  samples(from: number, to: number): number {
    let total = 0
    for (let second = from; second < to; second++) {
      const slot = this.#slotIfHeld(second)
      if (slot === -1) continue
      for (let b = 0; b < LATENCY_BOUNDS_MS.length; b++) total += this.#latency[slot * LATENCY_BOUNDS_MS.length + b]
    }
    return total
  }

  #slot(second: number): number {
    const slot = second % this.length
    if (this.#secondOf[slot] !== second) {
      this.#secondOf[slot] = second
      for (const counter of this.#counters) counter[slot] = 0
      if (this.#latency.length > 0) this.#latency.fill(0, slot * LATENCY_BOUNDS_MS.length, (slot + 1) * LATENCY_BOUNDS_MS.length)
    }
    return slot
  }

  #slotIfHeld(second: number): number {
    if (second < 0) return -1
    const slot = second % this.length
    return this.#secondOf[slot] === second ? slot : -1
  }
}

/** The first bucket whose upper bound is ≥ `ms` (the last one for anything larger). */
export function bucketOf(ms: number): number {
  if (!(ms > LATENCY_BOUNDS_MS[0])) return 0
  let at = Math.ceil(Math.log(ms / 0.01) / Math.log(1.25) - 1e-9)
  // The logarithm can land a hair below an exact bound's index: step past a bound that is too small.
  if (at < LATENCY_BOUNDS_MS.length && LATENCY_BOUNDS_MS[at] < ms) at++
  return Math.min(at, LATENCY_BOUNDS_MS.length - 1)
}
