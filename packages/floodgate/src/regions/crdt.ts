// The usage CRDT of one (key, policy, window): grow-only counters, one entry per region, merged by maximum.
//
// Every field is a G-counter entry: it has exactly one writer (a region, or one process of a
// region) and only ever grows. Merging two copies takes the larger value of each field, so merges
// commute, associate, and a copy merged twice (a replayed or duplicated message) counts once.
// Region totals are rolled up from per-process entries (`fold`), so a process retrying a write,
// or a region restarting its processes, never counts a unit twice or loses one already written.
//
// Field names (region and origin names never contain `|`):
// - `u|<region>`: units the region admitted (charged) in the window;
// - `d|<region>`: units the region was asked for (admitted or denied): its demand;
// - `g|<from>|<to>`: units `from` handed to `to` from its allotment (split mode);
// - `o|<origin>|<sub>`: one process's share of its region's `<sub>` entry (local Redis only);
// - `a|<region>`: how much of `u|<region>` this region has already charged into its own state
//   (token-bucket and GCRA in shared mode; local Redis only).
// The Lua twin is src/regions/usage.lua.

/** One window's fields: G-counter entries by field name. */
export type UsageFields = ReadonlyMap<string, number>

/** The field of a region's admitted units. */
export function usedField(region: string): string {
  return `u|${region}`
}

/** The field of a region's demand (units asked for, admitted or not). */
export function demandField(region: string): string {
  return `d|${region}`
}

/** The field of the units `from` handed to `to` (split mode). */
export function grantField(from: string, to: string): string {
  return `g|${from}|${to}`
}

/** True for fields every region may hold and exchange; false for a region's private bookkeeping (`o|`, `a|`). */
export function isSharedField(field: string): boolean {
  const kind = field.charCodeAt(0)
  return (kind === 0x75 || kind === 0x64 || kind === 0x67) && field.charCodeAt(1) === 0x7c // u| d| g|
}

/** The pointwise maximum of two copies: the merge of the CRDT. */
export function mergeFields(a: UsageFields, b: UsageFields): Map<string, number> {
  const merged = new Map(a)
  for (const [field, value] of b) {
    const mine = merged.get(field)
    if (mine === undefined || value > mine) merged.set(field, value)
  }
  return merged
}

/** Merges `from` into `into` in place; returns whether any field grew. */
export function mergeInto(into: Map<string, number>, from: UsageFields): boolean {
  let grew = false
  for (const [field, value] of from) {
    const mine = into.get(field)
    if (mine === undefined || value > mine) {
      into.set(field, value)
      grew = true
    }
  }
  return grew
}

/**
 * Adds one process's cumulative count into its region's entry, as the Lua twin does: the process
 * entry `o|<origin>|<sub>` keeps the largest cumulative seen and the region entry grows by what is
 * new. A cumulative sent twice, or an older one arriving late, adds nothing. `sub` is `u`, `d` or
 * `g|<to>`; the region entry is `u|<region>`, `d|<region>` or `g|<region>|<to>`.
 */
export function fold(fields: Map<string, number>, region: string, origin: string, sub: string, cumulative: number): void {
  const originField = `o|${origin}|${sub}`
  const old = fields.get(originField) ?? 0
  if (cumulative <= old) return
  fields.set(originField, cumulative)
  const regionField = `${sub.charAt(0)}|${region}${sub.slice(1)}`
  fields.set(regionField, (fields.get(regionField) ?? 0) + cumulative - old)
}

/** Units `region` admitted, as this copy knows. */
export function usedBy(fields: UsageFields, region: string): number {
  return fields.get(usedField(region)) ?? 0
}

/** Units `region` was asked for, as this copy knows. */
export function demandOf(fields: UsageFields, region: string): number {
  return fields.get(demandField(region)) ?? 0
}

/** Units every region but `self` admitted, as this copy knows: what shared mode subtracts. */
export function usedByOthers(fields: UsageFields, self: string): number {
  let total = 0
  for (const [field, value] of fields) {
    if (field.charCodeAt(0) === 0x75 && field.charCodeAt(1) === 0x7c && field.slice(2) !== self) total += value
  }
  return total
}

/** Units admitted by all regions, as this copy knows. */
export function usedByAll(fields: UsageFields): number {
  let total = 0
  for (const [field, value] of fields) {
    if (field.charCodeAt(0) === 0x75 && field.charCodeAt(1) === 0x7c) total += value
  }
  return total
}

/** Units handed to `region` by the others (split mode). */
export function grantedTo(fields: UsageFields, region: string): number {
  let total = 0
  const suffix = `|${region}`
  for (const [field, value] of fields) {
    if (field.startsWith('g|') && field.endsWith(suffix) && field.indexOf('|', 2) === field.length - suffix.length) total += value
  }
  return total
}

/** Units `region` handed to the others (split mode). */
export function grantedBy(fields: UsageFields, region: string): number {
  let total = 0
  const prefix = `g|${region}|`
  for (const [field, value] of fields) {
    if (field.startsWith(prefix)) total += value
  }
  return total
}

/** Only the fields regions exchange, as a new map. */
export function sharedFields(fields: UsageFields): Map<string, number> {
  const shared = new Map<string, number>()
  for (const [field, value] of fields) if (isSharedField(field)) shared.set(field, value)
  return shared
}
