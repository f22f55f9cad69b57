// A policy record (block deadline and algorithm state) as the bytes kept under one memcached key.

import type { PolicyRecord } from '../../core/evaluate.js'

/**
 * `[blockedUntil, state length or -1, ...state]` as little-endian doubles: the numbers round-trip
 * exactly, as they do in the Redis records, so a state read back steps exactly like the one written.
 */
export function encodeRecord(record: PolicyRecord): Buffer {
  const state = record.state
  const buffer = Buffer.alloc(8 * (2 + (state?.length ?? 0)))
  buffer.writeDoubleLE(record.blockedUntil, 0)
  buffer.writeDoubleLE(state === undefined ? -1 : state.length, 8)
  if (state !== undefined) for (let i = 0; i < state.length; i++) buffer.writeDoubleLE(state[i], 16 + 8 * i)
  return buffer
}

/** The record in `bytes`; undefined for anything that is not one (a key written by something else is read as absent). */
export function decodeRecord(bytes: Buffer): PolicyRecord | undefined {
  if (bytes.length < 16 || bytes.length % 8 !== 0) return undefined
  const blockedUntil = bytes.readDoubleLE(0)
  const length = bytes.readDoubleLE(8)
  if (!Number.isFinite(blockedUntil) || (length !== -1 && length !== bytes.length / 8 - 2)) return undefined
  if (length === -1) return { blockedUntil, state: undefined }
  const state: number[] = new Array(length)
  for (let i = 0; i < length; i++) state[i] = bytes.readDoubleLE(16 + 8 * i)
  return { blockedUntil, state }
}
