// Reads a RedisStore record the way runner.lua writes it, so tests can check what is stored.

import type { Redis } from 'ioredis'

/** A stored record: blockedUntil and the state's numbers (undefined: a block without state). */
export interface StoredRecord {
  blockedUntil: number
  state: number[] | undefined
}

/**
 * Decodes a record: a tag byte, then little-endian doubles: 's' the state, 'b' blockedUntil and the
 * state, 'n' blockedUntil alone; an upper-case tag first has the key's expiry, which this skips.
 */
export function decodeStoredRecord(bytes: Buffer): StoredRecord {
  const { tag, numbers } = splitRecord(bytes)
  if (tag === 's') return { blockedUntil: 0, state: numbers }
  if (tag === 'b') return { blockedUntil: numbers[0], state: numbers.slice(1) }
  if (tag === 'n' && numbers.length === 1) return { blockedUntil: numbers[0], state: undefined }
  throw new Error(`not a record: tag ${JSON.stringify(tag)}, ${numbers.length} numbers`)
}

/** The expiry (server ms) a record carries, or undefined when it carries none. */
export function storedExpiry(bytes: Buffer): number | undefined {
  return bytes[0] >= 0x41 && bytes[0] <= 0x5a ? bytes.readDoubleLE(1) : undefined
}

function splitRecord(bytes: Buffer): { tag: string; numbers: number[] } {
  if ((bytes.length - 1) % 8 !== 0) throw new Error(`not a record: ${bytes.length} bytes`)
  const numbers = Array.from({ length: (bytes.length - 1) / 8 }, (_, i) => bytes.readDoubleLE(1 + 8 * i))
  const tag = String.fromCharCode(bytes[0])
  return tag === tag.toUpperCase() ? { tag: tag.toLowerCase(), numbers: numbers.slice(1) } : { tag, numbers }
}

/** The record stored under `key`, or null when there is none. */
export async function readRecord(client: Pick<Redis, 'getBuffer'>, key: string): Promise<StoredRecord | null> {
  const bytes = await client.getBuffer(key)
  return bytes === null ? null : decodeStoredRecord(bytes)
}
