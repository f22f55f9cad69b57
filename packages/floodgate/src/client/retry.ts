// withRetry: repeats a rate-limited call after its Retry-After, plus full-jitter exponential backoff.

export interface RetryOptions {
  /** How many times to try again after the first call (default 3). */
  retries?: number
  /** Backoff base in milliseconds (default 100): attempt n waits up to base·2ⁿ on top of Retry-After. */
  baseMs?: number
  /** Cap of the backoff part in milliseconds (default 10 000). */
  maxMs?: number
  /** Source of randomness in [0, 1); replaceable so a caller can make waits reproducible. */
  random?: () => number
}

/**
 * Calls `fn` until it is no longer rate-limited or `retries` are used up, then returns its last
 * value (or throws its last error). Rate-limited means: a returned or thrown value with HTTP status
 * 429 (a fetch `Response`, an error or object with `status`/`statusCode`), or a Floodgate
 * `CheckResult` with `allowed: false`. Each wait is the server's Retry-After — never earlier, since
 * that would certainly be denied again — plus a random share of the exponential backoff (full
 * jitter), so many clients denied together do not come back together.
 */
export async function withRetry<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const retries = options.retries ?? 3
  const baseMs = options.baseMs ?? 100
  const maxMs = options.maxMs ?? 10_000
  const random = options.random ?? Math.random
  for (let attempt = 0; ; attempt++) {
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
    await sleep(retryAfterMs + backoffMs(attempt, baseMs, maxMs, random))
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
