// A hash tag for every Cluster slot: the text that, put in `{…}`, sends a key to that slot. A merge's
// idempotency token carries its slot's tag (merge-runner.lua), so that it lives, and moves when the
// slot is resharded, with the records it guards, whichever user keys a call of that slot holds.

import { keySlot } from './slot.js'

const SLOTS = 16384

let tags: string[] | undefined

/** The shortest base-36 text (the first found, counting up) whose hash tag is `slot`. */
export function slotTag(slot: number): string {
  if (tags === undefined) {
    // Counting up fills every slot within about 170,000 texts (a few ms, once per process).
    const found = new Array<string>(SLOTS)
    let missing = SLOTS
    for (let n = 0; missing > 0; n++) {
      const text = n.toString(36)
      const at = keySlot(`{${text}}`)
      if (found[at] === undefined) {
        found[at] = text
        missing--
      }
    }
    tags = found
  }
  return tags[slot]
}

/**
 * Where a merge call's tokens of `slot` go: `<prefix>{<slot's tag>}:wt:` and the origin, on a
 * Cluster; `<prefix>wt:` and the origin on one server (slot -1).
 */
export function tokenPrefix(prefix: string, slot: number): string {
  return slot < 0 ? `${prefix}wt:` : `${prefix}{${slotTag(slot)}}:wt:`
}
