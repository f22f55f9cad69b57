// One server's script calls, ordered so that Redis and Node work at the same time instead of in turn.

/**
 * How long requests wait behind a call in flight that has not answered (ms). Far above a healthy
 * call's time (a full batch takes Redis a few milliseconds), so it only matters when an answer
 * will never come: ioredis drops, without settling them, commands in flight when a connection
 * closes (with `autoResendUnfulfilledCommands: false`), and a lane must not wait for them forever.
 */
export const STALL_MS = 20

/** The smallest half a batch is split into: smaller calls cost more per request than the overlap saves. */
export const MIN_PART = 64

/**
 * Keeps up to two script calls in flight to a server: one running in Redis, one queued behind it,
 * so Redis goes from one to the next without waiting for a round trip. Requests that come while
 * both are in flight wait here, all together, and go as one call (up to `maxBatch`) the moment one
 * answers — before that call's callers are resolved. A big batch goes in two halves, one now and
 * one waiting to go with whatever comes next, so the callers keep being split into groups that take
 * turns: Redis decides one while this process answers another and gathers its next requests.
 * Requests that trickle in over many event-loop turns (an HTTP server's) share one call instead
 * of a call each.
 *
 * Measured with bench/redis.ts's load (256 callers, gcra, ten interleaved rounds): 556k
 * decisions/s with two in flight against 492k with one (Redis 98% against 83% busy: with one, it
 * idles for each round trip). Calls encoded when a batch came, and queued as such, had made two in
 * flight the slower choice (362k against 428k): many small calls, and garbage collection in this
 * process taking 42% of its time against 18%.
 *
 * A call that has not answered after STALL_MS is given up on: what waits goes anyway, and its
 * late answer no longer holds anything back.
 */
export class Lane<T> {
  /** Calls in flight at most. */
  static readonly DEPTH = 2

  // Calls are counted per epoch: a stall starts a new one, and answers of older ones are ignored.
  private epoch = 0
  private inFlight = 0
  private waiting: T[] = []
  private stallTimer: NodeJS.Timeout | undefined
  private lastAnswerAt = 0

  /**
   * `start` sends one call of the given requests and calls `done` once its reply (or failure)
   * arrived, before anything else; `maxBatch` is the most requests in one call.
   */
  constructor(
    private readonly start: (requests: T[], done: () => void) => void,
    private readonly maxBatch: number,
  ) {}

  /** Requests waiting to go with the next call. */
  get queued(): number {
    return this.waiting.length
  }

  /**
   * Sends `requests`, with any that wait, now if fewer than DEPTH calls are in flight (a big batch:
   * half now), else with the next call. The lane keeps the array.
   */
  submit(requests: T[]): void {
    if (this.waiting.length === 0) this.waiting = requests
    else for (const request of requests) this.waiting.push(request)
    if (this.inFlight < Lane.DEPTH) {
      const half = this.waiting.length >= 2 * MIN_PART ? Math.ceil(this.waiting.length / 2) : this.waiting.length
      this.launch(Math.min(half, this.maxBatch))
    }
    if (this.waiting.length > 0 && this.stallTimer === undefined) {
      this.lastAnswerAt = performance.now()
      this.armStallTimer(STALL_MS)
    }
  }

  // Sends the first `count` waiting requests as one call.
  private launch(count: number): void {
    const requests = count === this.waiting.length ? this.waiting : this.waiting.slice(0, count)
    this.waiting = count === this.waiting.length ? [] : this.waiting.slice(count)
    const epoch = this.epoch
    this.inFlight++
    this.start(requests, () => {
      if (epoch !== this.epoch) return
      this.inFlight--
      this.lastAnswerAt = performance.now()
      if (this.waiting.length > 0) this.launch(Math.min(this.waiting.length, this.maxBatch))
    })
  }

  private armStallTimer(delayMs: number): void {
    this.stallTimer = setTimeout(this.checkStall, Math.max(1, Math.ceil(delayMs)))
    this.stallTimer.unref()
  }

  // Requests have waited since the last answer (or since they began to wait) for STALL_MS: give
  // up on the calls in flight. One timer per lane, re-armed for the rest of the time while answers come.
  private readonly checkStall = (): void => {
    this.stallTimer = undefined
    if (this.waiting.length === 0) return
    const quietMs = performance.now() - this.lastAnswerAt
    if (quietMs < STALL_MS) return this.armStallTimer(STALL_MS - quietMs)
    this.epoch++
    this.inFlight = 0
    this.launch(Math.min(this.waiting.length, this.maxBatch))
    if (this.waiting.length > 0) this.armStallTimer(STALL_MS)
  }
}
