// Graceful shutdown pieces: the HTTP server's sockets tracked so a drain closes idle keep-alive ones at
// once and busy ones as soon as their requests end, and the timers a shutdown deadline runs on.

import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/** The timers a shutdown deadline is set with; tests pass ones they fire by hand. */
export interface ShutdownTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const SYSTEM_TIMERS: ShutdownTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
}

/**
 * Every socket of an HTTP server and how many of its requests are in flight. Envoy and every
 * client pool keep connections open, some before sending anything: Node's own close() only reaps
 * sockets that finished a request and sit idle, so without this a drain would wait the whole
 * shutdown timeout for sockets that hold no work at all.
 */
export class ConnectionTracker {
  readonly #inFlight = new Map<Socket, number>()
  // Answers not yet finished: those whose head is still unwritten get Connection: close at a drain.
  readonly #responses = new Set<ServerResponse>()
  #draining = false

  constructor(server: Server) {
    const tracker = this
    // One listener for every answer's `close` (the answer is `this`), not a closure and a `once`
    // wrapper per request; the request still holds its socket when the answer closes.
    function onResponseClose(this: ServerResponse): void {
      tracker.#ended(this.req.socket, this)
    }
    server.on('connection', (socket: Socket) => {
      // One accepted between the start of a drain and the listener's close has no request yet.
      if (this.#draining) {
        socket.destroy()
        return
      }
      this.#inFlight.set(socket, 0)
      socket.once('close', () => this.#inFlight.delete(socket))
    })
    // First among the request listeners, so a request is counted before any handler can answer it.
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
      const socket = request.socket
      const count = this.#inFlight.get(socket)
      if (count === undefined) return
      this.#inFlight.set(socket, count + 1)
      // While draining every answer says the connection ends with it (Node then closes the socket).
      if (this.#draining) response.setHeader('Connection', 'close')
      this.#responses.add(response)
      response.on('close', onResponseClose)
    })
  }

  /** Open sockets, busy or idle. */
  get size(): number {
    return this.#inFlight.size
  }

  /**
   * Starts the drain: sockets with no request in flight (idle keep-alive ones, and ones that never
   * sent a complete request head) close now; the others once their last request is answered, and
   * every answer from now on carries `Connection: close`.
   */
  drain(): void {
    this.#draining = true
    for (const [socket, count] of this.#inFlight) if (count === 0) socket.destroy()
    for (const response of this.#responses) if (!response.headersSent) response.setHeader('Connection', 'close')
  }

  /** The shutdown deadline passed: every socket closes, whatever it was doing. */
  destroyAll(): void {
    for (const socket of this.#inFlight.keys()) socket.destroy()
  }

  #ended(socket: Socket, response: ServerResponse): void {
    this.#responses.delete(response)
    const count = this.#inFlight.get(socket)
    if (count === undefined) return
    this.#inFlight.set(socket, count - 1)
    // The answer is written: end the socket once it is flushed to the client.
    if (this.#draining && count === 1) socket.destroySoon()
  }
}
