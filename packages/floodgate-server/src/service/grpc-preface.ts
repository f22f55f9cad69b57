// The gate in front of plaintext gRPC (TCP and the unix socket): a connection gets its HTTP/2 session only
// once it sent the client connection preface: the 24-byte magic and the SETTINGS frame that must follow
// it (RFC 9113 §3.4), which every HTTP/2 client sends at once without waiting for the server. Node's
// session setup (an nghttp2 session, our SETTINGS written) costs ~20 KiB and a slice of the event loop
// per socket; a flood of sockets that never speak, or that send the magic alone, made the server pay it
// thousands of times while a legitimate client waited. Held here, such a socket costs a buffer.

import type { Socket } from 'node:net'

/** The 24 bytes every HTTP/2 client sends first (RFC 9113 §3.4). */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

/** An HTTP/2 frame header's bytes: length (24 bits), type, flags, stream id (RFC 9113 §4.1). */
const FRAME_HEADER_BYTES = 9
const SETTINGS_FRAME = 0x4
/** The initial SETTINGS_MAX_FRAME_SIZE: a first frame larger than this is a FRAME_SIZE_ERROR anyway. */
const MAX_FIRST_FRAME_BYTES = 16_384

/**
 * How many bytes the preface takes, given what was read so far: a number once it is known, 'more' while
 * bytes are missing to tell, 'bad' when what was read cannot begin a client preface.
 */
function prefaceLength(read: Buffer, awaitSettings: boolean): number | 'more' | 'bad' {
  const compared = Math.min(read.length, CLIENT_PREFACE.length)
  if (read.compare(CLIENT_PREFACE, 0, compared, 0, compared) !== 0) return 'bad'
  if (read.length < CLIENT_PREFACE.length) return 'more'
  if (!awaitSettings) return CLIENT_PREFACE.length
  if (read.length < CLIENT_PREFACE.length + FRAME_HEADER_BYTES) return 'more'
  const length = read.readUIntBE(CLIENT_PREFACE.length, 3)
  const type = read[CLIENT_PREFACE.length + 3]
  const stream = read.readUInt32BE(CLIENT_PREFACE.length + 5) & 0x7fff_ffff
  // A SETTINGS frame is on stream 0 and holds 6-byte entries.
  if (type !== SETTINGS_FRAME || stream !== 0 || length % 6 !== 0 || length > MAX_FIRST_FRAME_BYTES) return 'bad'
  return CLIENT_PREFACE.length + FRAME_HEADER_BYTES + length
}

/**
 * Reads `socket` until it sent the whole client preface (with `awaitSettings`, the magic and the SETTINGS
 * frame after it; else the magic alone), then puts back everything read and calls `open` with it, for
 * http2 to read from the start. A socket whose bytes cannot begin a preface is destroyed as soon as they
 * show it (an HTTP/1.1 request at its first line), unanswered. The deadline is the caller's
 * (GrpcConnections' sweep).
 */
export function awaitPreface(socket: Socket, open: (socket: Socket) => void, awaitSettings = true): void {
  let read: Buffer | undefined
  // A reset before the hand-off has no one else to report to; http2 adds its own listener after it.
  const onError = () => {}
  const onData = (chunk: Buffer) => {
    read = read === undefined ? chunk : Buffer.concat([read, chunk])
    const length = prefaceLength(read, awaitSettings)
    if (length === 'bad') {
      socket.destroy()
      return
    }
    if (length === 'more' || read.length < length) return
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
