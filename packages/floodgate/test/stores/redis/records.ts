// Reads a RedisStore record the way scripts/record.lua writes it, so tests can check what is stored.

import type { Redis } from 'ioredis'

/** A stored record: blockedUntil and the state's numbers (undefined: a block without state). */
export interface StoredRecord {
  blockedUntil: number
  state: number[] | undefined
}

/**
 * Decodes a record: a tag byte, the key's expiry, then little-endian doubles: 'S' the state, 'B'
 * blockedUntil and the state, 'N' blockedUntil alone.
 */
export function decodeStoredRecord(bytes: Buffer): StoredRecord {
  const numbers = doubles(bytes).slice(1)
  const tag = String.fromCharCode(bytes[0])
  if (tag === 'S') return { blockedUntil: 0, state: numbers }
  if (tag === 'B' && numbers.length >= 1) return { blockedUntil: numbers[0], state: numbers.slice(1) }
  if (tag === 'N' && numbers.length === 1) return { blockedUntil: numbers[0], state: undefined }
  throw new Error(`not a record: tag ${JSON.stringify(tag)}, ${numbers.length} numbers after the expiry`)
}

/** The expiry (server ms) a record carries. */
export function storedExpiry(bytes: Buffer): number {
  return doubles(bytes)[0]
}

function doubles(bytes: Buffer): number[] {
  if (bytes.length < 9 || (bytes.length - 1) % 8 !== 0) throw new Error(`not a record: ${bytes.length} bytes`)
  return Array.from({ length: (bytes.length - 1) / 8 }, (_, i) => bytes.readDoubleLE(1 + 8 * i))
}

/** The record stored under `key`, or null when there is none. */
export async function readRecord(client: Pick<Redis, 'getBuffer'>, key: string): Promise<StoredRecord | null> {
  const bytes = await client.getBuffer(key)
  return bytes === null ? null : decodeStoredRecord(bytes)
}
