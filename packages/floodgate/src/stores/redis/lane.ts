// One server's script calls, ordered so that Redis and Node work at the same time instead of in turn.

/**
 * How long requests wait behind a call in flight that has not answered (ms). Far above a healthy
 * call's time (a full batch takes Redis a few milliseconds), so it only matters when an answer
 * will never come: ioredis drops, without settling them, commands in flight when a connection
 * closes (with `autoResendUnfulfilledCommands: false`), and a lane must not wait for them forever.
 */
export const STALL_MS = 20

/** The smallest part a batch for an idle lane is split into: smaller calls cost more per request than the overlap saves. */
export const MIN_PART = 64

/**
 * Keeps one script call in flight to a server. Requests that come meanwhile wait here, all
 * together, and go as one call (up to `maxBatch`) the moment the call answers — before that call's
 * callers are resolved. A big batch for an idle lane goes in two halves, one now and one waiting,
 * so from then on two groups of callers take turns: Redis decides one while this process answers
 * the other and gathers its next requests. Each call is as large as the callers allow, which is
 * what both sides' cost per decision falls with, and requests that trickle in over many event-loop
 * turns (an HTTP server's) still share one call instead of queueing a call per turn.
 *
 * Why not more in flight: a second call queued behind the running one spares Redis the round trip
 * between calls, but it splits the callers in three smaller groups and keeps every request alive
 * for one call longer, and this process then spends far more on garbage collection, whose helper
 * threads compete with Redis for the machine's cores: one in flight decides more per second.
 *
 * A call that has not answered after STALL_MS is given up on: what waits goes anyway, and its
 * late answer no longer holds anything back.
 */
export class Lane<T> {
  // Calls are counted per epoch: a stall starts a new one, and an answer of an older one is ignored.
  private epoch = 0
  private busy = false
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

  /** Requests waiting for the call in flight to answer. */
  get queued(): number {
    return this.waiting.length
  }

  /** Sends `requests` now if no call is in flight (a big batch: half now), else with the next call. */
  submit(requests: T[]): void {
    if (this.waiting.length === 0) this.waiting = requests
    else for (const request of requests) this.waiting.push(request)
    if (!this.busy) {
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
    this.busy = true
    this.start(requests, () => {
      if (epoch !== this.epoch) return
      this.busy = false
      this.lastAnswerAt = performance.now()
      if (this.waiting.length > 0) this.launch(Math.min(this.waiting.length, this.maxBatch))
    })
  }

  private armStallTimer(delayMs: number): void {
    this.stallTimer = setTimeout(this.checkStall, Math.max(1, Math.ceil(delayMs)))
    this.stallTimer.unref()
  }

  // Requests have waited since the last answer (or since they began to wait) for STALL_MS: give
  // up on the call in flight. One timer per lane, re-armed for the rest of the time while answers come.
  private readonly checkStall = (): void => {
    this.stallTimer = undefined
    if (this.waiting.length === 0) return
    const quietMs = performance.now() - this.lastAnswerAt
    if (quietMs < STALL_MS) return this.armStallTimer(STALL_MS - quietMs)
    this.epoch++
    this.busy = false
    this.launch(Math.min(this.waiting.length, this.maxBatch))
    if (this.waiting.length > 0) this.armStallTimer(STALL_MS)
  }
}
