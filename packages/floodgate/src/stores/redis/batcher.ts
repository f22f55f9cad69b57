// Coalesces work submitted during one turn of the event loop into one flush, with no timer delay.

/**
 * Collects items synchronously and hands them to `flush` all at once, from `setImmediate`: after
 * the current callback, every promise continuation and every other I/O callback of this loop turn
 * (e.g. all HTTP requests that arrived together) has had its chance to add an item.
 * `process.nextTick` would flush after each single I/O callback instead, because Node drains the
 * tick queue between callbacks, so under HTTP load its batches would hold one request each.
 */
export class TickBatcher<T> {
  private pending: T[] = []
  private scheduled = false

  constructor(private readonly flush: (items: T[]) => void) {}

  /** Queues `item` for this turn's flush. */
  add(item: T): void {
    this.pending.push(item)
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.run)
    }
  }

  private readonly run = (): void => {
    const items = this.pending
    this.pending = []
    this.scheduled = false
    this.flush(items)
  }
}
