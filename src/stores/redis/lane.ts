// One server's script calls, ordered so that Redis and Node work at the same time instead of in turn.

/**
 * How long calls wait behind calls in flight that have not answered (ms). Far above a healthy
 * call's time (a full batch takes Redis a few milliseconds), so it only matters when an answer
 * will never come: ioredis drops, without settling them, commands in flight when a connection
 * closes (with `autoResendUnfulfilledCommands: false`), and a lane must not wait for them forever.
 */
export const STALL_MS = 20

/**
 * Keeps one script call in flight to a server; calls submitted meanwhile wait, already encoded,
 * and the oldest goes out the moment the call answers — before that call's callers are resolved.
 * RedisStore sends a big batch for an idle lane in two parts, so from then on two halves of the
 * callers take turns: Redis decides one while this process answers the other and gathers its next
 * requests. Each call is as large as the callers allow, which is what both sides' cost per
 * decision falls with.
 *
 * Why not more in flight: a second call queued behind the running one would spare Redis the
 * round trip between calls, but it splits the callers in three smaller groups and keeps every
 * request alive for one call longer. Measured with 256 callers (bench/redis.ts's load, twelve
 * interleaved rounds): two in flight gave 362k decisions/s against 428k for one, with this
 * process spending 1.52 against 0.92 µs per decision, most of the difference garbage collection,
 * whose helper threads then compete with Redis for the machine's cores.
 *
 * A call that has not answered after STALL_MS is given up on: what waits goes anyway, and its
 * late answer no longer holds anything back.
 */
export class Lane<C> {
  /** Calls in flight at most. */
  static readonly DEPTH = 1

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
