// The embedded store's states that do not fit their record's words (see KeyTable), each in an array
// of its own, found by index.

/** Arrays by index; a freed index is given to the next state kept. */
export class Asides {
  private readonly arrays: (number[] | undefined)[] = []
  private readonly free: number[] = []

  /** The array at `ref` (the table's own: callers only read it). */
  get(ref: number): number[] {
    return this.arrays[ref]!
  }

  /** Keeps a copy of `state`; answers its index. */
  add(state: readonly number[]): number {
    const ref = this.free.length > 0 ? this.free.pop()! : this.arrays.length
    this.arrays[ref] = state.slice()
    return ref
  }

  /** Frees the array at `ref`; answers how many numbers it held. */
  drop(ref: number): number {
    const length = this.arrays[ref]!.length
    this.arrays[ref] = undefined
    this.free.push(ref)
    return length
  }

  clear(): void {
    this.arrays.length = 0
    this.free.length = 0
  }
}
