// The gate in front of plaintext gRPC (TCP and the unix socket): a connection gets its HTTP/2 session only
// once it sent the client preface. Node's session setup (an nghttp2 session, our SETTINGS written) costs
// ~20 KiB and a slice of the event loop per socket; a flood of sockets that never speak made the server
// pay it thousands of times while a legitimate client waited. Held here, such a socket costs a buffer.

import type { Socket } from 'node:net'

/** The 24 bytes every HTTP/2 client sends first (RFC 9113 §3.4). */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

/**
 * Reads `socket` until it sent the whole client preface, then puts back everything read (the preface and
 * whatever followed it, e.g. the client's SETTINGS) and calls `open` with it, for http2 to read from the
 * start. A socket whose bytes differ from the preface is destroyed at the first such byte (an HTTP/1.1
 * request at its first line). The deadline for the preface is the caller's (GrpcConnections' sweep).
 */
export function awaitPreface(socket: Socket, open: (socket: Socket) => void): void {
  let read: Buffer | undefined
  // A reset before the hand-off has no one else to report to; http2 adds its own listener after it.
  const onError = () => {}
  const onData = (chunk: Buffer) => {
    read = read === undefined ? chunk : Buffer.concat([read, chunk])
    const compared = Math.min(read.length, CLIENT_PREFACE.length)
    if (read.compare(CLIENT_PREFACE, 0, compared, 0, compared) !== 0) {
      socket.destroy()
      return
    }
    if (read.length < CLIENT_PREFACE.length) return
    socket.off('data', onData)
    socket.off('error', onError)
    // Paused, or the stream (still flowing) would drop what comes before http2 reads it.
    socket.pause()
    socket.unshift(read)
    open(socket)
  }
  socket.on('error', onError)
  socket.on('data', onData)
}
