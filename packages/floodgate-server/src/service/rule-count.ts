// Counts the rules of a snapshot, for the `floodgate_rules_loaded` gauge and `floodgate validate`.

import type { DescriptorDescription, RuleSet } from 'floodgate/rules'

/** Descriptors that carry a rule (a limit, `limits:`, or `unlimited`) across every domain of `rules`. */
export function countRules(rules: RuleSet): number {
  const count = (descriptors: DescriptorDescription[]): number =>
    descriptors.reduce((sum, d) => sum + (d.rule ? 1 : 0) + count(d.descriptors), 0)
  return rules.describe().domains.reduce((sum, domain) => sum + count(domain.descriptors), 0)
}

/** The ids of those rules (`domain.key_value…`), in file order: the names the dashboard records hits under. */
export function ruleIds(rules: RuleSet): string[] {
  const ids: string[] = []
  const walk = (descriptors: DescriptorDescription[]): void => {
    for (const d of descriptors) {
      if (d.rule) ids.push(d.rule.id)
      walk(d.descriptors)
    }
  }
  for (const domain of rules.describe().domains) walk(domain.descriptors)
  return ids
}
