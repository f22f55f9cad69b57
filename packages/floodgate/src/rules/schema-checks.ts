// Shared checks of the rules-file readers: known keys, booleans, and "did you mean" for near misses.

import type { Node } from 'yaml'
import type { MapEntry, YamlSource } from './yaml-source.js'

/** Reports keys not in `known` and returns the known ones by name. */
export function checkKeys(src: YamlSource, entries: MapEntry[], path: string, known: readonly string[]): Map<string, MapEntry> {
  const fields = new Map<string, MapEntry>()
  for (const entry of entries) {
    if (known.includes(entry.key)) {
      fields.set(entry.key, entry)
      continue
    }
    const where = path === '' ? entry.key : `${path}.${entry.key}`
    src.report(entry.keyNode, where, `unknown key "${entry.key}"${suggestion(entry.key, known)}; known keys here are ${known.join(', ')}`)
  }
  return fields
}

export function readBoolean(src: YamlSource, entry: MapEntry | undefined, path: string): boolean {
  if (entry?.value === undefined) return false
  const value = src.scalar(entry.value)
  if (typeof value === 'boolean') return value
  src.report(entry.value, path, `must be true or false, got ${describeNode(src, entry.value)}`)
  return false
}

export function describeNode(src: YamlSource, node: Node | undefined): string {
  const text = src.text(node)
  return text === undefined ? (node === undefined ? 'nothing' : 'a list or mapping') : JSON.stringify(text)
}

/** `, did you mean "x"?` for a near miss (edit distance ≤ 2), else the empty string. */
export function suggestion(word: string, known: readonly string[]): string {
  let best: string | undefined
  let bestDistance = 3
  for (const candidate of known) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best === undefined ? '' : ` (did you mean "${best}"?)`
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]
}
