// Counts the rules of a snapshot, for the `floodgate_rules_loaded` gauge and `floodgate validate`.

import type { DescriptorDescription, RuleSet } from 'floodgate/rules'

/** Descriptors that carry a rule (a limit, `limits:`, or `unlimited`) across every domain of `rules`. */
export function countRules(rules: RuleSet): number {
  const count = (descriptors: DescriptorDescription[]): number =>
    descriptors.reduce((sum, d) => sum + (d.rule ? 1 : 0) + count(d.descriptors), 0)
  return rules.describe().domains.reduce((sum, domain) => sum + count(domain.descriptors), 0)
}
