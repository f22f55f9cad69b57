// One server's script calls, ordered so that Redis and Node work at the same time instead of in turn.

/**
 * How long calls wait behind calls in flight that have not answered (ms). Far above a healthy
 * call's time (a full batch takes Redis a few milliseconds), so it only matters when an answer
 * will never come: ioredis drops, without settling them, commands in flight when a connection
 * closes (with `autoResendUnfulfilledCommands: false`), and a lane must not wait for them forever.
 */
export const STALL_MS = 20

/**
 * Keeps up to DEPTH script calls in flight to one server; calls submitted beyond that wait, already
 * encoded, and the oldest goes out the moment a call answers — before that call's callers are
 * resolved. So while this process handles one call's answers, the server runs the next call and
 * the one after it is already queued behind: neither side waits for the other.
 *
 * Sending every call at once would not overlap them: Redis reads whatever has arrived, runs it
 * all, and only then writes the replies, so calls sent microseconds apart come back together and
 * Node and Redis take turns. A call sent as another answers reaches Redis while the call before it
 * runs, so its reply leaves alone. A call that waits here costs the server nothing: it would only
 * have queued there. Calls that have not answered after STALL_MS are given up on: what waits goes
 * anyway, and their late answers no longer hold anything back.
 */
export class Lane<C> {
  /** Calls in flight at most: one running in Redis, one queued behind it. */
  static readonly DEPTH = 2

  // Calls are counted per epoch: a stall starts a new one, and answers of older epochs are ignored.
  private epoch = 0
  private inFlight = 0
  private waiting: C[] = []
  private stallTimer: NodeJS.Timeout | undefined
  private lastAnswerAt = 0

  /** `start` sends a call and calls `done` once its reply (or failure) arrived, before anything else. */
  constructor(private readonly start: (call: C, done: () => void) => void) {}

  /** How many more calls would go out at once. */
  get free(): number {
    return Lane.DEPTH - this.inFlight
  }

  /** Sends `call` now if fewer than DEPTH are in flight, else once one of them answers. */
  submit(call: C): void {
    if (this.inFlight < Lane.DEPTH) return this.launch(call)
    if (this.waiting.length === 0) this.lastAnswerAt = performance.now()
    this.waiting.push(call)
    if (this.stallTimer === undefined) this.armStallTimer(STALL_MS)
  }

  private launch(call: C): void {
    const epoch = this.epoch
    this.inFlight++
    this.start(call, () => {
      if (epoch !== this.epoch) return
      this.inFlight--
      this.lastAnswerAt = performance.now()
      const next = this.waiting.shift()
      if (next !== undefined) this.launch(next)
    })
  }

  private armStallTimer(delayMs: number): void {
    this.stallTimer = setTimeout(this.checkStall, Math.max(1, Math.ceil(delayMs)))
    this.stallTimer.unref()
  }

  // Calls have waited since the last answer (or since they began to wait) for STALL_MS: give up
  // on the calls in flight. One timer per lane, re-armed for the rest of the time while answers come.
  private readonly checkStall = (): void => {
    this.stallTimer = undefined
    if (this.waiting.length === 0) return
    const quietMs = performance.now() - this.lastAnswerAt
    if (quietMs < STALL_MS) return this.armStallTimer(STALL_MS - quietMs)
    this.epoch++
    this.inFlight = 0
    const waiting = this.waiting
    this.waiting = []
    for (const call of waiting) this.submit(call)
  }
}
