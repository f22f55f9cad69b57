// Graceful shutdown pieces: the HTTP server's sockets tracked so a drain closes idle keep-alive ones at
// once and busy ones as soon as their requests end (and so a full server sheds the longest idle one
// for a new client), and the timers a shutdown deadline runs on.

import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { AddressCounts } from './address-counts.js'

/**
 * Connections the kernel holds for accept (it caps this at net.core.somaxconn). Node's 511 overflows in a
 * burst of connects while the event loop is busy: the kernel then drops a client's handshake ACK and
 * retransmits its SYN-ACK 1 s, 3 s later, so a new client waits seconds although the cap sheds for it.
 */
export const LISTEN_BACKLOG = 4096

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
  // Sockets with no request in flight, in the order they fell idle (the longest idle first), with the
  // bytes read when they did: one that read more since holds part of a request head, and is not idle.
  readonly #idle = new Map<Socket, number>()
  readonly #maxConnections: number
  // Open sockets per client address: at the cap the shed falls on an address holding more than its share.
  readonly #perAddress = new AddressCounts()
  #shed = 0
  // Answers not yet finished: those whose head is still unwritten get Connection: close at a drain.
  readonly #responses = new Set<ServerResponse>()
  #draining = false

  /**
   * `maxConnections`: past it, a new connection sheds the socket idle the longest (never one with a
   * request in flight or arriving); with none idle, the new one is closed unanswered. Node's own
   * `server.maxConnections` would refuse the new client instead, so a flood of idle sockets would lock
   * legitimate clients out until the timeouts freed them.
   */
  constructor(server: Server, maxConnections = Number.POSITIVE_INFINITY) {
    this.#maxConnections = maxConnections
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
      this.#idle.set(socket, socket.bytesRead)
      const address = this.#perAddress.add(socket.remoteAddress)
      socket.once('close', () => {
        this.#inFlight.delete(socket)
        this.#idle.delete(socket)
        this.#perAddress.remove(address)
      })
      if (this.#inFlight.size > this.#maxConnections) this.#shedIdle()
    })
    // First among the request listeners, so a request is counted before any handler can answer it.
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
      const socket = request.socket
      const count = this.#inFlight.get(socket)
      if (count === undefined) return
      this.#inFlight.set(socket, count + 1)
      if (count === 0) this.#idle.delete(socket)
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

  /** Open sockets, and those closed at the cap for a newer client (the idle one shed, or the newcomer refused). */
  stats(): { open: number; shed: { cap: number } } {
    return { open: this.#inFlight.size, shed: { cap: this.#shed } }
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

  /**
   * The server is over its cap: closes the socket idle the longest among those of addresses holding more
   * than their share (one flooding address sheds its own sockets, not a legitimate client's older
   * keep-alive one), else the one idle the longest (the newcomer itself when no other is).
   */
  #shedIdle(): void {
    this.#shed++
    let fallback: Socket | undefined
    for (const [socket, bytesRead] of this.#idle) {
      // Bytes since it fell idle: a request head is arriving (a pipelined one, or a slow client the request timeout will end).
      if (socket.bytesRead !== bytesRead) continue
      if (this.#perAddress.overShare(socket.remoteAddress)) return this.#close(socket)
      fallback ??= socket
    }
    if (fallback !== undefined) this.#close(fallback)
  }

  #close(socket: Socket): void {
    this.#idle.delete(socket)
    this.#inFlight.delete(socket)
    socket.destroy()
  }

  #ended(socket: Socket, response: ServerResponse): void {
    this.#responses.delete(response)
    const count = this.#inFlight.get(socket)
    if (count === undefined) return
    this.#inFlight.set(socket, count - 1)
    if (count === 1) this.#idle.set(socket, socket.bytesRead)
    // The answer is written: end the socket once it is flushed to the client.
    if (this.#draining && count === 1) socket.destroySoon()
  }
}
