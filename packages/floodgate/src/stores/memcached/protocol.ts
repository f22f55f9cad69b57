// The memcached binary-protocol requests the store sends through a memjs client (its own API lacks gets/cas), and their answers.

import { FloodgateError } from '../../core/errors.js'

/** One raw reply of the binary protocol, as memjs hands it to `perform`'s callback. */
export interface MemjsResponse {
  header: { status: number; cas?: Buffer }
  val: Buffer
  extras?: Buffer
}

/**
 * A memjs `Client` (1.x), recognised by the methods the store uses: `perform` sends one binary
 * request to the server that `getServer(key)` picks and calls back with its reply, `incrSeq`/`seq`
 * give the opaque number that pairs them. memjs's own `get`/`set` cannot read or send a CAS token,
 * so the store builds its requests itself and memjs keeps the connections, timeouts and retries.
 */
export interface MemjsClientLike {
  perform(key: string, request: Buffer, seq: number, callback: (error: Error | null, response: MemjsResponse | null) => void): void
  incrSeq(): void
  readonly seq: number
  readonly servers: readonly unknown[]
  getServer(key: string): number
  close(): void
}

/** The outcome of a write that may lose a race: stored, the key exists (add) / changed (cas), or is gone (cas). */
export type WriteOutcome = 'stored' | 'exists' | 'missing'

/** How a conditional write went, and the CAS token of what it stored (to undo it only if nobody wrote since). */
export interface WriteResult {
  outcome: WriteOutcome
  cas: Buffer | null
}

/** A value and its CAS token, or nulls when the key is absent. */
export interface GetsReply {
  value: Buffer | null
  cas: Buffer | null
}

const OP_GET = 0x00
const OP_SET = 0x01
const OP_ADD = 0x02
const OP_DELETE = 0x04
const OP_INCREMENT = 0x05
const OP_DECREMENT = 0x06

const STATUS_OK = 0
const STATUS_NOT_FOUND = 1
const STATUS_EXISTS = 2
const STATUS_NOT_STORED = 5

/** Longest relative expiry memcached accepts; a larger number is read as a Unix time. */
const RELATIVE_EXPIRY_LIMIT_S = 60 * 60 * 24 * 30

/**
 * The memcached operations a MemcachedStore uses, over one memjs client. Every method rejects when
 * the server fails or answers with an unexpected status: the store turns that into a refused decision.
 */
export class MemcachedOps {
  constructor(private readonly client: MemjsClientLike) {}

  /** `gets`: the value and its CAS token. */
  async gets(key: string): Promise<GetsReply> {
    const response = await this.send(key, OP_GET, EMPTY, EMPTY, undefined)
    if (response.header.status === STATUS_NOT_FOUND) return { value: null, cas: null }
    expectStatus(response, STATUS_OK, 'get', key)
    return { value: response.val, cas: response.header.cas ?? null }
  }

  /** `add`: stores only when the key is absent. */
  async add(key: string, value: Buffer, expirySeconds: number, now: number): Promise<WriteResult> {
    const response = await this.send(key, OP_ADD, storageExtras(expirySeconds, now), value, undefined)
    return writeResult(response, 'add', key)
  }

  /** `cas`: stores only when the key still has the token `cas` (nobody wrote it since it was read). */
  async cas(key: string, value: Buffer, expirySeconds: number, cas: Buffer, now: number): Promise<WriteResult> {
    const response = await this.send(key, OP_SET, storageExtras(expirySeconds, now), value, cas)
    return writeResult(response, 'cas', key)
  }

  /** `delete` only while the key still has the token `cas`. */
  async deleteIf(key: string, cas: Buffer): Promise<WriteResult> {
    const response = await this.send(key, OP_DELETE, EMPTY, EMPTY, cas)
    return writeResult(response, 'delete', key)
  }

  /**
   * `incr` by `amount`, creating the key at `amount` when absent (the binary protocol's initial value,
   * one atomic step: the text protocol's `add` then `incr`, as upstream envoyproxy/ratelimit does it,
   * in one round trip). Answers the count after the increment.
   */
  async increment(key: string, amount: number, expirySeconds: number, now: number): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const response = await this.send(key, OP_INCREMENT, counterExtras(amount, amount, expirySeconds, now), EMPTY, undefined)
      // Two first increments at once: memcached creates the key for one and answers the other
      // "not stored"; the key exists now, so that one's next try counts.
      if (response.header.status === STATUS_NOT_STORED && attempt < 3) continue
      expectStatus(response, STATUS_OK, 'incr', key)
      return readCounter(response.val)
    }
  }

  /** `decr` by `amount` (memcached stops at 0); an absent key stays absent. Answers the count after it, or undefined. */
  async decrement(key: string, amount: number): Promise<number | undefined> {
    // Expiry 0xffffffff: never create the key (the binary protocol's "fail if absent").
    const response = await this.send(key, OP_DECREMENT, counterExtras(amount, 0, 0xffffffff, 0), EMPTY, undefined)
    if (response.header.status === STATUS_NOT_FOUND) return undefined
    expectStatus(response, STATUS_OK, 'decr', key)
    return readCounter(response.val)
  }

  /** `delete`; an absent key is fine. */
  async delete(key: string): Promise<void> {
    const response = await this.send(key, OP_DELETE, EMPTY, EMPTY, undefined)
    if (response.header.status === STATUS_NOT_FOUND) return
    expectStatus(response, STATUS_OK, 'delete', key)
  }

  private send(key: string, opcode: number, extras: Buffer, value: Buffer, cas: Buffer | undefined): Promise<MemjsResponse> {
    const client = this.client
    client.incrSeq()
    const seq = client.seq
    const request = encodeRequest(opcode, key, extras, value, seq, cas)
    return new Promise((resolve, reject) => {
      client.perform(key, request, seq, (error, response) => {
        if (error !== null || response === null) reject(unavailable(error))
        else resolve(response)
      })
    })
  }
}

const EMPTY = Buffer.alloc(0)

/** A request: the 24-byte header (magic 0x80, the opaque `seq`, an optional CAS token), extras, key, value. */
export function encodeRequest(opcode: number, key: string, extras: Buffer, value: Buffer, seq: number, cas?: Buffer): Buffer {
  const keyBytes = Buffer.byteLength(key)
  const buffer = Buffer.alloc(24 + extras.length + keyBytes + value.length)
  buffer.writeUInt8(0x80, 0)
  buffer.writeUInt8(opcode, 1)
  buffer.writeUInt16BE(keyBytes, 2)
  buffer.writeUInt8(extras.length, 4)
  buffer.writeUInt32BE(extras.length + keyBytes + value.length, 8)
  buffer.writeUInt32BE(seq >>> 0, 12)
  if (cas !== undefined) cas.copy(buffer, 16, 0, 8)
  extras.copy(buffer, 24)
  buffer.write(key, 24 + extras.length)
  value.copy(buffer, 24 + extras.length + keyBytes)
  return buffer
}

/** Flags (0) and the expiry of a set/add. */
function storageExtras(expirySeconds: number, now: number): Buffer {
  const extras = Buffer.alloc(8)
  extras.writeUInt32BE(expiry(expirySeconds, now), 4)
  return extras
}

/** Amount, initial value (64-bit each) and expiry of an incr/decr. */
function counterExtras(amount: number, initial: number, expirySeconds: number, now: number): Buffer {
  const extras = Buffer.alloc(20)
  extras.writeBigUInt64BE(BigInt(amount), 0)
  extras.writeBigUInt64BE(BigInt(initial), 8)
  extras.writeUInt32BE(expirySeconds === 0xffffffff ? expirySeconds : expiry(expirySeconds, now), 16)
  return extras
}

/** Memcached reads an expiry above 30 days as a Unix time, so a longer one is sent as one. */
function expiry(seconds: number, now: number): number {
  const whole = Math.max(1, Math.ceil(seconds))
  return whole <= RELATIVE_EXPIRY_LIMIT_S ? whole : Math.ceil(now / 1000) + whole
}

function writeResult(response: MemjsResponse, operation: string, key: string): WriteResult {
  const status = response.header.status
  if (status === STATUS_EXISTS || status === STATUS_NOT_STORED) return { outcome: 'exists', cas: null }
  if (status === STATUS_NOT_FOUND) return { outcome: 'missing', cas: null }
  expectStatus(response, STATUS_OK, operation, key)
  return { outcome: 'stored', cas: response.header.cas ?? null }
}

function readCounter(value: Buffer): number {
  return Number(value.readBigUInt64BE(0))
}

function expectStatus(response: MemjsResponse, status: number, operation: string, key: string): void {
  if (response.header.status === status) return
  const detail = response.val !== undefined && response.val.length > 0 ? `: ${response.val.toString('latin1').slice(0, 120)}` : ''
  throw new FloodgateError(
    'STORE_UNAVAILABLE',
    `memcached answered ${operation} of ${JSON.stringify(key)} with status ${response.header.status}${detail}`,
  )
}

function unavailable(error: Error | null): FloodgateError {
  const reason = error === null ? 'no answer' : error.message
  const failure = new FloodgateError(
    'STORE_UNAVAILABLE',
    `memcached did not answer (${reason}); the limiter answers with its onStoreError mode meanwhile`,
  )
  noAnswers.add(failure)
  return failure
}

// The errors of requests no server answered (refused, closed, timed out), as opposed to answers
// the store could not use (a status, compare-and-swap conflicts): only those mean a server is down.
const noAnswers = new WeakSet<Error>()

/** True for the error of a request that its server did not answer (a server down or unreachable). */
export function isNoAnswer(error: unknown): boolean {
  return error instanceof Error && noAnswers.has(error)
}
