// Reads a RedisStore record the way runner.lua writes it, so tests can check what is stored.

import type { Redis } from 'ioredis'

/** A stored record: blockedUntil and the state's numbers (undefined: a block without state). */
export interface StoredRecord {
  blockedUntil: number
  state: number[] | undefined
}

/** Decodes a record: little-endian doubles, blockedUntil first; one extra byte marks "no state". */
export function decodeStoredRecord(bytes: Buffer): StoredRecord {
  const count = Math.floor(bytes.length / 8)
  const numbers = Array.from({ length: count }, (_, i) => bytes.readDoubleLE(8 * i))
  if (bytes.length % 8 === 1) return { blockedUntil: numbers[0], state: undefined }
  if (bytes.length % 8 !== 0) throw new Error(`not a record: ${bytes.length} bytes`)
  return { blockedUntil: numbers[0], state: numbers.slice(1) }
}

/** The record stored under `key`, or null when there is none. */
export async function readRecord(client: Redis, key: string): Promise<StoredRecord | null> {
  const bytes = await client.getBuffer(key)
  return bytes === null ? null : decodeStoredRecord(bytes)
}
