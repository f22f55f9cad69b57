// Where the embedded store keeps every key's numbers: blocks of 8-byte words in one typed array.

/**
 * Fixed-size blocks of float64 words carved out of one Float64Array, addressed by the offset of
 * their first word. A Uint32Array views the same memory, so a word can also hold two 32-bit
 * numbers. Numbers in a typed array cost 8 bytes each, where a JS object costs a header per key
 * and a boxed double per field; the price is that a block is freed by hand. A freed block is kept
 * for the next block of the same size, which is what a store of one policy set mostly asks for.
 */
export class Slab {
  /** The words; replaced (with `u32`) when the slab grows, so read it after `alloc`, never before. */
  f64: Float64Array
  u32: Uint32Array
  private top = 0
  // Per block size in words, the offsets of freed blocks.
  private free: number[][] = []

  constructor(private readonly initialWords = 1024) {
    this.f64 = new Float64Array(initialWords)
    this.u32 = new Uint32Array(this.f64.buffer)
  }

  /** The offset of a block of `words` words (its content is whatever the last user left). */
  alloc(words: number): number {
    const freed = this.free[words]
    if (freed !== undefined && freed.length > 0) return freed.pop()!
    const at = this.top
    if (at + words > this.f64.length) this.grow(at + words)
    this.top = at + words
    return at
  }

  /** Gives a block back, for the next `alloc` of the same size. */
  release(at: number, words: number): void {
    const freed = this.free[words]
    if (freed === undefined) this.free[words] = [at]
    else freed.push(at)
  }

  /** Forgets every block and returns to the initial size. */
  clear(): void {
    this.f64 = new Float64Array(this.initialWords)
    this.u32 = new Uint32Array(this.f64.buffer)
    this.top = 0
    this.free = []
  }

  // Grows by an eighth (the copy is a memcpy, amortised to a few per word): less idle room than
  // doubling, where a store just past a power of two would carry almost as much again unused.
  private grow(needed: number): void {
    const length = Math.max(needed, this.f64.length + (this.f64.length >>> 3) + 1024)
    const f64 = new Float64Array(length)
    f64.set(this.f64)
    this.f64 = f64
    this.u32 = new Uint32Array(f64.buffer)
  }
}
