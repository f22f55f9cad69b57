// FloodgateClient: asks a running Floodgate service whether a request may pass, failing open or closed.

import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { toMilliseconds, type ClientDuration } from './duration.js'
import type { CheckRequest, CheckResponse } from '../api/check.js'
import type { CheckResult } from './types.js'

export interface FloodgateClientOptions {
  /** Base URL of the service's HTTP API, e.g. `http://127.0.0.1:8080`. */
  url: string
  /**
   * Longest wait for an answer once a connection is ready (default `100ms`): a rate limiter must
   * not become the slow part. Connecting has its own budget, `connectTimeout`.
   */
  timeout?: ClientDuration
  /**
   * Longest wait for a connection (default `2s`): TCP, TLS, and the service's first answer on it.
   * Kept apart from `timeout` because a new connection costs far more than a decision on an open
   * one; sharing one budget failed the first call of every process open.
   */
  connectTimeout?: ClientDuration
  /**
   * Open a connection when the client is made (default true), with one `GET /healthz`, so the
   * first `check` finds it ready; a `check` made before it is ready waits for it (within
   * `connectTimeout`). Connections are kept alive between calls and never keep the process up.
   */
  warm?: boolean
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

/** An answer as read off the wire. */
interface Answer {
  status: number
  text: string
}

/** Why no answer came: the budget that ran out, or the network's error. */
class NoAnswer extends Error {}

/** How long a kept-alive connection may stay idle. */
const IDLE_CONNECTION_MS = 60_000

/** Answers larger than this are not the service's: reading stops there. */
const MAX_ANSWER_BYTES = 1 << 20

/**
 * A small client for `POST /v1/check` over node:http(s), with its own keep-alive connections.
 * Call `close()` to drop them when done (they are unreferenced, so they never hold the process).
 */
export class FloodgateClient {
  readonly #url: URL
  readonly #timeoutMs: number
  readonly #connectTimeoutMs: number
  readonly #failOpen: boolean
  readonly #agent: HttpAgent
  readonly #request: typeof httpRequest
  // Settles (never rejects) once the warm-up connection is ready or has failed.
  #warming: Promise<void> | undefined

  constructor(options: FloodgateClientOptions) {
    if (typeof options?.url !== 'string' || !/^https?:\/\//.test(options.url)) {
      throw new TypeError(`url: expected the service's base URL such as "http://127.0.0.1:8080", got ${JSON.stringify(options?.url)}`)
    }
    if (options.warm !== undefined && typeof options.warm !== 'boolean') {
      throw new TypeError(`warm: expected true or false, got ${JSON.stringify(options.warm)}`)
    }
    this.#url = new URL(options.url)
    this.#timeoutMs = toMilliseconds(options.timeout ?? '100ms', 'timeout')
    this.#connectTimeoutMs = toMilliseconds(options.connectTimeout ?? '2s', 'connectTimeout')
    this.#failOpen = options.failOpen ?? true
    const tls = this.#url.protocol === 'https:'
    // Idle connections are closed by the client first, before the service's keep-alive timeout
    // (Fastify's default: 72s), so a check is never written into a socket the server is closing.
    const agentOptions = { keepAlive: true, timeout: IDLE_CONNECTION_MS }
    this.#agent = tls ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions)
    this.#request = tls ? (httpsRequest as typeof httpRequest) : httpRequest
    if (options.warm ?? true) {
      this.#warming = this.#exchange('GET', '/healthz', undefined, this.#connectTimeoutMs).then(
        () => undefined,
        () => undefined,
      )
    }
  }

  /** Resolves once the warm-up connection is ready, or failed (then the next check connects itself). */
  ready(): Promise<void> {
    return this.#warming ?? Promise.resolve()
  }

  /**
   * Decides `request` (charging `hits`, default 1). Resolves with the service's answer — also when
   * it says 429 — or, when the service cannot answer, with `allowed` per `failOpen` and `error` set.
   * Rejects with FloodgateClientError only when the service calls the request malformed.
   */
  async check(request: CheckRequest): Promise<CheckResult> {
    if (this.#warming !== undefined) {
      const warming = this.#warming
      await warming
      // Once settled, later calls skip the await.
      if (this.#warming === warming) this.#warming = undefined
    }
    let answer: Answer
    try {
      answer = await this.#exchange('POST', '/v1/check', JSON.stringify(request), this.#timeoutMs)
    } catch (error) {
      return this.#failure((error as Error).message)
    }
    if (answer.status === 200 || answer.status === 429) {
      try {
        return JSON.parse(answer.text) as CheckResponse
      } catch (error) {
        return this.#failure(`unreadable answer: ${(error as Error).message}`)
      }
    }
    if (answer.status >= 400 && answer.status < 500) {
      throw new FloodgateClientError(answer.status, `Floodgate rejected the request (${answer.status}): ${reasonOf(answer.text)}`)
    }
    return this.#failure(`service answered ${answer.status}: ${reasonOf(answer.text)}`)
  }

  /** Drops the kept-alive connections; a later `check` opens a new one. */
  close(): void {
    this.#agent.destroy()
  }

  #failure(error: string): CheckResult {
    return { allowed: this.#failOpen, retryAfterMs: 0, results: [], error }
  }

  /**
   * One request. `answerMs` counts from when the connection is ready — at once on a kept-alive
   * one; a new one has `connectTimeout` to connect first. Rejects with NoAnswer.
   */
  #exchange(method: string, path: string, body: string | undefined, answerMs: number): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      let req: ClientRequest
      const fail = (reason: string) => {
        clearTimeout(timer)
        req.destroy()
        reject(new NoAnswer(reason))
      }
      const awaitAnswer = () => {
        clearTimeout(timer)
        timer = setTimeout(() => fail(`no answer within ${answerMs}ms`), answerMs)
      }
      req = this.#request(
        new URL(path, this.#url),
        {
          method,
          agent: this.#agent,
          headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = []
          let size = 0
          res.on('data', (chunk: Buffer) => {
            size += chunk.length
            if (size > MAX_ANSWER_BYTES) fail(`answer larger than ${MAX_ANSWER_BYTES} bytes`)
            else chunks.push(chunk)
          })
          res.on('end', () => {
            clearTimeout(timer)
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') })
          })
          res.on('error', (error) => fail(describeError(error)))
        },
      )
      req.on('error', (error) => fail(describeError(error)))
      req.on('socket', (socket) => {
        // A kept-alive socket is ready at once; a new one has the connect budget to get ready.
        if (req.reusedSocket) return awaitAnswer()
        timer = setTimeout(() => fail(`could not connect within ${this.#connectTimeoutMs}ms`), this.#connectTimeoutMs)
        socket.once(this.#url.protocol === 'https:' ? 'secureConnect' : 'connect', awaitAnswer)
      })
      req.end(body)
    })
  }
}

/** A network error as `check` reports it: its code (ECONNREFUSED, ENOTFOUND, …) or message. */
function describeError(error: unknown): string {
  const code = (error as { code?: unknown })?.code
  return typeof code === 'string' ? code : ((error as Error)?.message ?? String(error))
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
