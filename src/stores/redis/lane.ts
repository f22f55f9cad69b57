// One server's script calls, ordered so that Redis and Node work at the same time instead of in turn.

/**
 * How long calls wait behind calls in flight that have not answered (ms). Far above a healthy
 * call's time (a full batch takes Redis a few milliseconds), so it only matters when an answer
 * will never come: ioredis drops, without settling them, commands in flight when a connection
 * closes (with `autoResendUnfulfilledCommands: false`), and a lane must not wait for them forever.
 */
export const STALL_MS = 20

/**
 * Holds one round of script calls in flight to one server; calls submitted meanwhile wait, already
 * encoded, and go out together the moment the round answers — before its callers are resolved, so
 * the server decides the next round while this process handles the answers of the last one
 * (double buffering).
 *
 * Sending every call at once would not overlap them: Redis reads whatever has arrived, runs it
 * all, and only then writes the replies, so two calls sent a few microseconds apart come back
 * together and Node and Redis still take turns. A call that waits here costs the server nothing:
 * it would only have queued behind the ones in flight. A round that has not answered after
 * STALL_MS is given up on: what waits goes anyway, and the old round's late answers no longer
 * hold anything back.
 */
export class Lane<C> {
  private round = 0
  private inFlight = 0
  private waiting: C[] = []
  private stallTimer: NodeJS.Timeout | undefined

  /** `start` sends a call and calls `done` once its reply (or failure) arrived, before anything else. */
  constructor(private readonly start: (call: C, done: () => void) => void) {}

  /** True when nothing is in flight: a call submitted now goes out at once. */
  get idle(): boolean {
    return this.inFlight === 0
  }

  /** Sends `call` now if nothing is in flight, else once the calls in flight have answered. */
  submit(call: C): void {
    if (this.inFlight === 0) return this.launch([call])
    this.waiting.push(call)
    if (this.stallTimer === undefined) {
      this.stallTimer = setTimeout(this.launchWaiting, STALL_MS)
      this.stallTimer.unref()
    }
  }

  private launch(calls: C[]): void {
    const round = ++this.round
    this.inFlight = calls.length
    const done = () => {
      if (round !== this.round || --this.inFlight > 0) return
      if (this.waiting.length > 0) this.launchWaiting()
    }
    for (const call of calls) this.start(call, done)
  }

  private readonly launchWaiting = (): void => {
    clearTimeout(this.stallTimer)
    this.stallTimer = undefined
    const waiting = this.waiting
    this.waiting = []
    if (waiting.length > 0) this.launch(waiting)
  }
}
