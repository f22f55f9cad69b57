// Reads a descriptor's Floodgate `limits:`: a list of policies, each checked by core createPolicy.

import type { Node } from 'yaml'
import { FloodgateError } from '../core/errors.js'
import { createPolicy, syncMismatch, syncMismatchMessage, type Policy, type PolicyOptions } from '../core/policy.js'
import type { MapEntry, YamlSource } from './yaml-source.js'

/** Reads `limits:` into frozen policies, reporting every issue into the source (undefined if any). */
export function readLimits(src: YamlSource, entry: MapEntry, path: string, shadow: boolean): readonly Policy[] | undefined {
  const items = src.items(entry.value)
  if (items === undefined || items.length === 0) {
    src.report(
      entry.value ?? entry.keyNode,
      path,
      "expected a non-empty list of policies such as `- { algorithm: gcra, limit: 10, period: '1s' }`",
    )
    return undefined
  }
  const policies: Policy[] = []
  const seen = new Map<string, number>()
  items.forEach((item, i) => {
    const itemPath = `${path}[${i}]`
    const policy = readPolicy(src, item, itemPath, shadow)
    if (policy === undefined) return
    if (seen.has(policy.name)) {
      src.report(
        item,
        `${itemPath}.name`,
        `duplicate policy name "${policy.name}" (also limits[${seen.get(policy.name)}]); give each policy its own name`,
      )
      return
    }
    seen.set(policy.name, i)
    policies.push(policy)
  })
  if (policies.length !== items.length) return undefined
  const mixed = syncMismatch(policies)
  if (mixed !== undefined) {
    src.report(items[mixed], `${path}[${mixed}].sync`, syncMismatchMessage(policies, mixed))
    return undefined
  }
  return Object.freeze(policies)
}

/** Runs core `createPolicy` and maps its error ("<path>.<field>: message") back onto the YAML node. */
function readPolicy(src: YamlSource, node: Node | undefined, path: string, shadow: boolean): Policy | undefined {
  const entries = src.entries(node)
  if (entries === undefined) {
    src.report(node, path, "expected a policy mapping such as `{ algorithm: token-bucket, limit: 100, period: '1m', burst: 20 }`")
    return undefined
  }
  const options = src.plain(node) as PolicyOptions
  try {
    return createPolicy(shadow ? { ...options, shadow: true } : options, path)
  } catch (error) {
    if (!(error instanceof FloodgateError)) throw error
    const split = /^(\S*?): (.*)$/s.exec(error.message)
    const issuePath = split?.[1] ?? path
    const field = issuePath.startsWith(`${path}.`) ? issuePath.slice(path.length + 1) : undefined
    const at = entries.find((e) => e.key === field)
    src.report(at ? (at.value ?? at.keyNode) : node, issuePath, split?.[2] ?? error.message)
    return undefined
  }
}
