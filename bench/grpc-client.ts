// A lean gRPC load client for the benchmarks: pre-encoded unary calls over a few long-lived node:http2
// sessions, so the client's own cost stays far below any server's and the server is what is measured.

import http2 from 'node:http2'

/** A gRPC message as it goes on the wire: the 5-byte prefix (uncompressed, big-endian length) and the bytes. */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(5 + message.length)
  frame[0] = 0
  frame.writeUInt32BE(message.length, 1)
  frame.set(message, 5)
  return frame
}

/** Unary calls over `sessions` HTTP/2 connections, round robin; a call resolves with its grpc-status. */
export class LeanGrpcClient {
  readonly #sessions: http2.ClientHttp2Session[]
  #next = 0

  private constructor(sessions: http2.ClientHttp2Session[]) {
    this.#sessions = sessions
  }

  /** Connects `sessions` sessions to `127.0.0.1:port` and waits until each is up. */
  static async connect(port: number, sessions: number): Promise<LeanGrpcClient> {
    const list = await Promise.all(
      Array.from(
        { length: sessions },
        () =>
          new Promise<http2.ClientHttp2Session>((resolve, reject) => {
            const session = http2.connect(`http://127.0.0.1:${port}`)
            session.once('connect', () => resolve(session))
            session.once('error', reject)
          }),
      ),
    )
    return new LeanGrpcClient(list)
  }

  /** One unary call of `path` with a pre-framed request; resolves with its grpc-status (0 is OK), rejects on a broken stream. */
  call(path: string, frame: Buffer): Promise<number> {
    const session = this.#sessions[this.#next++ % this.#sessions.length]
    return new Promise((resolve, reject) => {
      const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' })
      let status: string | undefined
      stream.on('response', (headers) => {
        // A trailers-only answer (an error) carries grpc-status in its headers.
        if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status'])
      })
      stream.resume()
      stream.on('trailers', (trailers) => (status = String(trailers['grpc-status'])))
      stream.on('error', reject)
      stream.on('close', () => (status === undefined ? reject(new Error(`${path}: no grpc-status`)) : resolve(Number(status))))
      stream.end(frame)
    })
  }

  close(): void {
    for (const session of this.#sessions) session.close()
  }
}
