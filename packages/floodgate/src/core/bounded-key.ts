// Long key text hashed to a short stand-in, so a client-supplied value can never make a store key (and
// the memory behind it) as long as the request that carried it. Every surface that builds a key from
// request text calls this: the middleware's key generators, the rules' store keys (the service's HTTP
// API and its gRPC path build theirs through `storeKeyOf`).

import { createHash } from 'node:crypto'

/** Longest key kept as it is (in UTF-16 code units, as `String.length` counts them). */
export const MAX_PLAIN_KEY_LENGTH = 256

/** What a hashed key starts with. Plain text starting with it is hashed too, so the two forms never meet. */
export const HASHED_KEY_PREFIX = 'sha256:'

/** A short, stable stand-in for a long or secret value: the first 128 bits of its SHA-256, in hex. */
export function keyDigest(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 32)
}

/**
 * `text` itself when it has at most `maxLength` characters, else `sha256:<32 hex digits>` of it.
 * Equal texts give equal keys and different texts different ones (to 128 bits of SHA-256): a plain
 * text that happens to look like a hashed key is hashed as well, so no client can pick its key to
 * share another's bucket.
 */
export function boundedKey(text: string, maxLength: number = MAX_PLAIN_KEY_LENGTH): string {
  return text.length <= maxLength && !text.startsWith(HASHED_KEY_PREFIX) ? text : HASHED_KEY_PREFIX + keyDigest(text)
}
