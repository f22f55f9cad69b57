// gRPC unary calls on a node:http2 stream: reading the one request message (size cap, compression,
// deadline) and sending the answer or a status, as the gRPC over HTTP/2 protocol and grpc-js do.

import http2 from 'node:http2'
import { promisify } from 'node:util'
import zlib from 'node:zlib'

/** The gRPC status codes this server sends. */
export const STATUS = Object.freeze({
  OK: 0,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
})

/** A call's final status: a code and a message for people. */
export interface GrpcStatus {
  code: number
  details: string
}

/** The head of every answer; `grpc-accept-encoding` tells clients which compressed requests are read. */
const RESPONSE_HEADERS: http2.OutgoingHttpHeaders = Object.freeze({
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
})
const OK_TRAILERS: http2.OutgoingHttpHeaders = Object.freeze({ 'grpc-status': '0' })
const TIMEOUT_UNITS_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 }
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/
const gunzip = promisify(zlib.gunzip)
const inflate = promisify(zlib.inflate)

/** Whether the call has had its answer (or was cancelled): nothing more may be written. */
function finished(stream: http2.ServerHttp2Stream): boolean {
  return stream.headersSent || stream.destroyed || stream.closed
}

/** Sends one message and status OK, unless the call is already over (its deadline passed, or the client left). */
export function sendMessage(stream: http2.ServerHttp2Stream, message: Uint8Array): void {
  if (finished(stream)) return
  const frame = Buffer.allocUnsafe(5 + message.length)
  frame[0] = 0
  frame.writeUInt32BE(message.length, 1)
  frame.set(message, 5)
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true })
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS))
  stream.end(frame)
}

/**
 * Ends the call with an error status in a trailers-only answer. A request still arriving (one too
 * big, say) is cut with RST_STREAM NO_ERROR once the answer is out, so its bytes are never read.
 *
 * "Once the answer is out" is a turn of the event loop later: the session writes the answer's
 * HEADERS from a native immediate, which runs before the JavaScript ones. Closed at once, Node 22's
 * nghttp2 sent the RST_STREAM alone and dropped the answer: the client waited for a status that
 * never came (a 70 KB request hung until its deadline).
 */
export function sendStatus(stream: http2.ServerHttp2Stream, status: GrpcStatus): void {
  if (finished(stream)) return
  stream.respond(
    { ...RESPONSE_HEADERS, 'grpc-status': String(status.code), 'grpc-message': encodeURI(status.details) },
    { endStream: true },
  )
  if (!stream.readableEnded) setImmediate(() => stream.close(http2.constants.NGHTTP2_NO_ERROR))
}

/**
 * Reads a unary call's one request message and hands it over once the client has half-closed, as
 * grpc-js does. A message larger than `maxBytes` is refused from its 5-byte prefix, before its bytes
 * arrive or anything is decoded (RESOURCE_EXHAUSTED); none, or a second one, is UNIMPLEMENTED;
 * gzip and deflate messages are inflated up to the same cap; a `grpc-timeout` ends the call with
 * DEADLINE_EXCEEDED if it has no answer by then.
 */
export function readUnaryCall(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  maxBytes: number,
  path: string,
  onMessage: (message: Uint8Array) => void,
): void {
  const timeout = headers['grpc-timeout']
  if (timeout !== undefined && !startDeadline(stream, String(timeout))) return
  let first: Buffer | undefined
  let chunks: Buffer[] | undefined
  let received = 0
  let length = -1
  const fail = (status: GrpcStatus) => {
    stream.removeAllListeners('data')
    sendStatus(stream, status)
  }
  stream.on('data', (chunk: Buffer) => {
    if (first === undefined) first = chunk
    else (chunks ??= [first]).push(chunk)
    received += chunk.length
    if (length < 0 && received >= 5) {
      const head = chunks === undefined ? first : Buffer.concat(chunks)
      length = head.readUInt32BE(1)
      if (length > maxBytes)
        return fail({ code: STATUS.RESOURCE_EXHAUSTED, details: `Received message larger than max (${length} vs. ${maxBytes})` })
    }
    if (length >= 0 && received > 5 + length)
      fail({ code: STATUS.UNIMPLEMENTED, details: `Received a second request message for server unary method ${path}` })
  })
  stream.once('end', () => {
    if (finished(stream)) return
    if (first === undefined || length < 0 || received < 5 + length) {
      sendStatus(stream, { code: STATUS.UNIMPLEMENTED, details: `Received no request message for server unary method ${path}` })
      return
    }
    const frame = chunks === undefined ? first : Buffer.concat(chunks)
    const message = frame.subarray(5, 5 + length)
    if (frame[0] === 0) onMessage(message)
    else inflateMessage(stream, frame[0], headerText(headers['grpc-encoding']), message, maxBytes, onMessage)
  })
}

/** A header's value as one string (a repeated header's values joined, as HTTP reads them). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(',') : value
}

/** Starts the call's deadline from its `grpc-timeout`; false (the call ended INTERNAL, as grpc-js does) when it is malformed. */
function startDeadline(stream: http2.ServerHttp2Stream, timeout: string): boolean {
  const match = GRPC_TIMEOUT.exec(timeout)
  if (match === null) {
    sendStatus(stream, { code: STATUS.INTERNAL, details: `Invalid grpc-timeout value "${timeout}"` })
    return false
  }
  const ms = Math.floor(Number(match[1]) * TIMEOUT_UNITS_MS[match[2]])
  const timer = setTimeout(() => sendStatus(stream, { code: STATUS.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }), ms)
  stream.once('close', () => clearTimeout(timer))
  return true
}

function inflateMessage(
  stream: http2.ServerHttp2Stream,
  flag: number,
  encoding: string | undefined,
  message: Uint8Array,
  maxBytes: number,
  onMessage: (message: Uint8Array) => void,
): void {
  if (flag !== 1 || encoding === undefined || encoding === 'identity') {
    sendStatus(stream, { code: STATUS.INTERNAL, details: 'Received a compressed message without a grpc-encoding' })
    return
  }
  if (encoding !== 'gzip' && encoding !== 'deflate') {
    sendStatus(stream, { code: STATUS.UNIMPLEMENTED, details: `Received message compressed with unsupported encoding "${encoding}"` })
    return
  }
  // maxOutputLength stops inflating at the cap: a small bomb never becomes a big buffer.
  const inflating = encoding === 'gzip' ? gunzip(message, { maxOutputLength: maxBytes }) : inflate(message, { maxOutputLength: maxBytes })
  inflating.then(onMessage, (error: NodeJS.ErrnoException) =>
    sendStatus(
      stream,
      error.code === 'ERR_BUFFER_TOO_LARGE'
        ? { code: STATUS.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${maxBytes}` }
        : { code: STATUS.INTERNAL, details: 'Failed to decompress message' },
    ),
  )
}
