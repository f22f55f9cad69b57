// The descriptor matcher: per-level maps for exact values, precompiled wildcard patterns, key-only defaults.

import type { DescriptorConfig, RuleTemplate } from './schema.js'

/** A request descriptor entry, as Envoy sends it. */
export interface DescriptorEntry {
  key: string
  value: string
}

/** One level of the config tree, indexed for lookup. */
export interface Level {
  /** key → value → node; every value entry is here, wildcard ones too (a literal `*` in a request matches itself). */
  readonly exact: ReadonlyMap<string, ReadonlyMap<string, CompiledNode>>
  /** key → wildcard entries, most specific first. */
  readonly wildcards: ReadonlyMap<string, readonly WildcardBranch[]>
  /** key → the entry written with that key and no value. */
  readonly keyOnly: ReadonlyMap<string, CompiledNode>
}

export interface CompiledNode {
  readonly rule: RuleTemplate | undefined
  readonly children: Level | undefined
}

interface WildcardBranch {
  readonly glob: Glob
  readonly node: CompiledNode
}

/** Builds the lookup structure of one level (and, recursively, of every level under it). */
export function compileLevel(descriptors: readonly DescriptorConfig[]): Level | undefined {
  if (descriptors.length === 0) return undefined
  const exact = new Map<string, Map<string, CompiledNode>>()
  const wildcards = new Map<string, WildcardBranch[]>()
  const keyOnly = new Map<string, CompiledNode>()
  for (const descriptor of descriptors) {
    const node: CompiledNode = { rule: descriptor.rule, children: compileLevel(descriptor.descriptors) }
    if (descriptor.value === undefined) {
      keyOnly.set(descriptor.key, node)
      continue
    }
    let values = exact.get(descriptor.key)
    if (values === undefined) exact.set(descriptor.key, (values = new Map()))
    values.set(descriptor.value, node)
    if (descriptor.value.includes('*')) {
      let list = wildcards.get(descriptor.key)
      if (list === undefined) wildcards.set(descriptor.key, (list = []))
      list.push({ glob: compileGlob(descriptor.value), node })
    }
  }
  // Most literal characters first: "192.168.1.*" is tried before "192.168.*". Array.prototype.sort
  // is stable, so patterns equally specific keep the order they were written in (as upstream does).
  for (const list of wildcards.values()) list.sort((a, b) => b.glob.literalLength - a.glob.literalLength)
  return { exact, wildcards, keyOnly }
}

/**
 * Finds the rule for one request descriptor. At each level the entry is looked up as exact
 * key+value, then the most specific wildcard value, then the key alone; the first hit is taken
 * (no backtracking to a less specific sibling, as in envoyproxy/ratelimit). The rule applies only
 * if the request ends exactly at that depth of the tree.
 */
export function findRule(level: Level | undefined, entries: readonly DescriptorEntry[]): RuleTemplate | undefined {
  let current = level
  for (let i = 0; i < entries.length; i++) {
    if (current === undefined) return undefined
    const node = lookup(current, entries[i].key, entries[i].value)
    if (node === undefined) return undefined
    if (i === entries.length - 1) return node.rule
    current = node.children
  }
  return undefined
}

function lookup(level: Level, key: string, value: string): CompiledNode | undefined {
  const exact = level.exact.get(key)?.get(value)
  if (exact !== undefined) return exact
  const wildcards = level.wildcards.get(key)
  if (wildcards !== undefined) {
    for (const branch of wildcards) if (globMatches(branch.glob, value)) return branch.node
  }
  return level.keyOnly.get(key)
}

/** A value pattern split at its `*`s, each matching zero or more characters. */
interface Glob {
  readonly parts: readonly string[]
  readonly literalLength: number
}

function compileGlob(pattern: string): Glob {
  const parts = pattern.split('*')
  return { parts, literalLength: pattern.length - (parts.length - 1) }
}

/** Anchored glob match without building a RegExp: prefix, suffix, then the middle parts in order. */
function globMatches(glob: Glob, value: string): boolean {
  const { parts } = glob
  if (value.length < glob.literalLength) return false
  const first = parts[0]
  const last = parts[parts.length - 1]
  if (!value.startsWith(first) || !value.endsWith(last)) return false
  let position = first.length
  const end = value.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i], position)
    if (found < 0 || found + parts[i].length > end) return false
    position = found + parts[i].length
  }
  return position <= end
}
