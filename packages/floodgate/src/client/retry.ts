// withRetry: repeats a rate-limited call after its Retry-After, plus full-jitter exponential backoff.

export interface RetryOptions {
  /** How many times to try again after the first call (default 3). */
  retries?: number
  /** Backoff base in milliseconds (default 100): attempt n waits up to base·2ⁿ on top of Retry-After. */
  baseMs?: number
  /** Cap of the backoff part in milliseconds (default 10 000). It does not shorten Retry-After: see `maxWaitMs`. */
  maxMs?: number
  /**
   * The longest single wait in milliseconds (default 60 000). When the server asks for more (a
   * per-day rule answers `Retry-After: 80238`), `withRetry` does not sleep: it throws
   * `RetryAfterTooLongError` at once, carrying the answer and its Retry-After, so the caller can
   * queue the work or report the limit. A retry earlier than Retry-After would only be denied again.
   */
  maxWaitMs?: number
  /** Stops waiting: an abort rejects with the signal's reason, during a wait or before the next call. */
  signal?: AbortSignal
  /** Source of randomness in [0, 1); replaceable so a caller can make waits reproducible. */
  random?: () => number
  /** The timer the waits run on (default the global ones); tests inject a manual one. */
  timers?: RetryTimers
}

/** The timer `withRetry` sleeps on. */
export interface RetryTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

const REAL_TIMERS: RetryTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
}

/**
 * The server asked for a longer wait than `maxWaitMs` allows. `result` is the rate-limited answer
 * (the returned value, e.g. the `Response` or `CheckResult`); when the call threw, the thrown error
 * is `cause` and `result` is undefined.
 */
export class RetryAfterTooLongError<T = unknown> extends Error {
  readonly code = 'RETRY_AFTER_TOO_LONG'
  /** What the server asked to wait, in milliseconds. */
  readonly retryAfterMs: number
  /** The cap that it exceeds. */
  readonly maxWaitMs: number
  /** How many calls were made (1 = the first call was already this answer). */
  readonly calls: number
  /** The rate-limited value the last call returned; undefined when it threw (see `cause`). */
  readonly result: T | undefined

  constructor(retryAfterMs: number, maxWaitMs: number, calls: number, outcome: { value: T } | { error: unknown }) {
    super(
      `rate limited: the server asks to retry after ${retryAfterMs} ms, more than maxWaitMs (${maxWaitMs} ms); ` +
        'not waiting. Raise maxWaitMs to wait that long, or retry later.',
      'error' in outcome ? { cause: outcome.error } : undefined,
    )
    this.name = 'RetryAfterTooLongError'
    this.retryAfterMs = retryAfterMs
    this.maxWaitMs = maxWaitMs
    this.calls = calls
    this.result = 'value' in outcome ? outcome.value : undefined
  }
}

/**
 * Calls `fn` until it is no longer rate-limited or `retries` are used up, then returns its last
 * value (or throws its last error). Rate-limited means: a returned or thrown value with HTTP status
 * 429 (a fetch `Response`, an error or object with `status`/`statusCode`), or a Floodgate
 * `CheckResult` with `allowed: false`. Each wait is the server's Retry-After — never earlier, since
 * that would certainly be denied again — plus a random share of the exponential backoff (full
 * jitter), so many clients denied together do not come back together. The whole wait stays within
 * `maxWaitMs`; a Retry-After beyond it throws `RetryAfterTooLongError` without waiting.
 */
export async function withRetry<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const retries = options.retries ?? 3
  const baseMs = options.baseMs ?? 100
  const maxMs = options.maxMs ?? 10_000
  const maxWaitMs = options.maxWaitMs ?? 60_000
  const random = options.random ?? Math.random
  const timers = options.timers ?? REAL_TIMERS
  const signal = options.signal
  if (!(maxWaitMs >= 0)) throw new TypeError(`maxWaitMs: expected a number of milliseconds >= 0, got ${maxWaitMs}`)
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted()
    let outcome: { value: T } | { error: unknown }
    try {
      outcome = { value: await fn() }
    } catch (error) {
      outcome = { error }
    }
    const subject = 'value' in outcome ? outcome.value : outcome.error
    const retryAfterMs = rateLimitedWait(subject)
    if (retryAfterMs === undefined || attempt >= retries) {
      if ('value' in outcome) return outcome.value
      throw outcome.error
    }
    if (retryAfterMs > maxWaitMs) throw new RetryAfterTooLongError(retryAfterMs, maxWaitMs, attempt + 1, outcome)
    // Jitter fills at most the room left below the cap, so the wait is never below Retry-After.
    const waitMs = Math.min(maxWaitMs, retryAfterMs + backoffMs(attempt, baseMs, maxMs, random))
    await sleep(waitMs, timers, signal)
  }
}

/** Full jitter: uniformly random in [0, min(maxMs, baseMs·2^attempt)). */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  return Math.floor(random() * Math.min(maxMs, baseMs * 2 ** attempt))
}

/** Milliseconds the server asked to wait, 0 when it named none; undefined when `subject` was not rate-limited. */
export function rateLimitedWait(subject: unknown): number | undefined {
  if (subject === null || typeof subject !== 'object') return undefined
  const value = subject as {
    status?: unknown
    statusCode?: unknown
    allowed?: unknown
    error?: unknown
    retryAfterMs?: unknown
    retryAfter?: unknown
    headers?: unknown
    never?: unknown
  }
  // An answer that says the request can never pass is final: retrying it only repeats the denial.
  if (value.never === true) return undefined
  const limited = value.status === 429 || value.statusCode === 429 || (value.allowed === false && value.error === undefined)
  if (!limited) return undefined
  if (typeof value.retryAfterMs === 'number' && value.retryAfterMs >= 0) return value.retryAfterMs
  const header = retryAfterHeader(value.headers) ?? value.retryAfter
  return parseRetryAfter(header)
}

/** Retry-After as milliseconds: delay-seconds or an HTTP date; 0 when absent or unreadable. */
export function parseRetryAfter(header: unknown, now = Date.now()): number {
  if (typeof header === 'number') return Math.max(0, header * 1000)
  if (typeof header !== 'string' || header.trim() === '') return 0
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000
  const date = Date.parse(header)
  return Number.isNaN(date) ? 0 : Math.max(0, date - now)
}

function retryAfterHeader(headers: unknown): string | undefined {
  if (headers === null || typeof headers !== 'object') return undefined
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get('retry-after') ?? undefined
  const record = headers as Record<string, unknown>
  const value = record['retry-after'] ?? record['Retry-After']
  return typeof value === 'string' ? value : undefined
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, timers: RetryTimers, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      timers.clearTimeout(handle)
      reject(signal?.reason)
    }
    const handle = timers.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
