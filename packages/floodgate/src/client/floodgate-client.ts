// FloodgateClient: asks a running Floodgate service whether a request may pass, failing open or closed.

import { toMilliseconds, type ClientDuration } from './duration.js'
import type { CheckRequest, CheckResponse, CheckResult } from './types.js'

export interface FloodgateClientOptions {
  /** Base URL of the service's HTTP API, e.g. `http://127.0.0.1:8080`. */
  url: string
  /** Longest wait for an answer (default `100ms`): a rate limiter must not become the slow part. */
  timeout?: ClientDuration
  /**
   * What `check` answers when the service cannot be asked (timeout, network error, 5xx):
   * allowed (`true`, default) so an outage of the limiter is not an outage of the API, or denied.
   */
  failOpen?: boolean
}

/** The service rejected the request itself (HTTP 400/404/413): a bug in the caller, not an outage. */
export class FloodgateClientError extends Error {
  readonly status: number

  constructor(status: number, message: string) {
    super(message)
    this.name = 'FloodgateClientError'
    this.status = status
  }
}

/** A small client for `POST /v1/check`. Uses the global `fetch`; holds no connections of its own. */
export class FloodgateClient {
  readonly #endpoint: string
  readonly #timeoutMs: number
  readonly #failOpen: boolean

  constructor(options: FloodgateClientOptions) {
    if (typeof options?.url !== 'string' || !/^https?:\/\//.test(options.url)) {
      throw new TypeError(`url: expected the service's base URL such as "http://127.0.0.1:8080", got ${JSON.stringify(options?.url)}`)
    }
    this.#endpoint = new URL('/v1/check', options.url).href
    this.#timeoutMs = toMilliseconds(options.timeout ?? '100ms', 'timeout')
    this.#failOpen = options.failOpen ?? true
  }

  /**
   * Decides `request` (charging `hits`, default 1). Resolves with the service's answer — also when
   * it says 429 — or, when the service cannot answer, with `allowed` per `failOpen` and `error` set.
   * Rejects with FloodgateClientError only when the service calls the request malformed.
   */
  async check(request: CheckRequest): Promise<CheckResult> {
    let response: Response
    try {
      response = await fetch(this.#endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(request),
        signal: AbortSignal.timeout(this.#timeoutMs),
      })
    } catch (error) {
      return this.#failure(describeFetchError(error, this.#timeoutMs))
    }
    if (response.status === 200 || response.status === 429) {
      try {
        return (await response.json()) as CheckResponse
      } catch (error) {
        return this.#failure(`unreadable answer: ${(error as Error).message}`)
      }
    }
    const text = await response.text().catch(() => '')
    if (response.status >= 400 && response.status < 500) {
      throw new FloodgateClientError(response.status, `Floodgate rejected the request (${response.status}): ${reasonOf(text)}`)
    }
    return this.#failure(`service answered ${response.status}: ${reasonOf(text)}`)
  }

  #failure(error: string): CheckResult {
    return { allowed: this.#failOpen, retryAfterMs: 0, results: [], error }
  }
}

function describeFetchError(error: unknown, timeoutMs: number): string {
  const name = (error as Error)?.name
  if (name === 'TimeoutError' || name === 'AbortError') return `no answer within ${timeoutMs}ms`
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error)
}

function reasonOf(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown }
    if (typeof body.message === 'string') return body.message
    if (typeof body.error === 'string') return body.error
  } catch {
    // not JSON: the raw text is the best reason there is
  }
  return text.slice(0, 200) || 'no body'
}
