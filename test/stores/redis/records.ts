// Reads a RedisStore record the way runner.lua writes it, so tests can check what is stored.

import type { Redis } from 'ioredis'

/** A stored record: blockedUntil and the state's numbers (undefined: a block without state). */
export interface StoredRecord {
  blockedUntil: number
  state: number[] | undefined
}

/**
 * Decodes a record: a tag byte, then little-endian doubles: 's' the state, 'b' blockedUntil and the
 * state, 'n' blockedUntil alone.
 */
export function decodeStoredRecord(bytes: Buffer): StoredRecord {
  const tag = String.fromCharCode(bytes[0])
  if ((bytes.length - 1) % 8 !== 0) throw new Error(`not a record: ${bytes.length} bytes`)
  const numbers = Array.from({ length: (bytes.length - 1) / 8 }, (_, i) => bytes.readDoubleLE(1 + 8 * i))
  if (tag === 's') return { blockedUntil: 0, state: numbers }
  if (tag === 'b') return { blockedUntil: numbers[0], state: numbers.slice(1) }
  if (tag === 'n' && numbers.length === 1) return { blockedUntil: numbers[0], state: undefined }
  throw new Error(`not a record: tag ${JSON.stringify(tag)}, ${numbers.length} numbers`)
}

/** The record stored under `key`, or null when there is none. */
export async function readRecord(client: Redis, key: string): Promise<StoredRecord | null> {
  const bytes = await client.getBuffer(key)
  return bytes === null ? null : decodeStoredRecord(bytes)
}
