// The rules engine's public surface: load, validate, match and hot-reload rate limit rules.

export { ConfigError, formatIssue, type ConfigIssue } from './errors.js'
export { loadRules, parseRules, readRuleSources, type RuleSource } from './load.js'
export type { DescriptorEntry, WildcardOrder } from './match.js'
export {
  RuleSet,
  storeKeyOf,
  type MatchedRule,
  type RuleSetOptions,
  type RuleSetDescription,
  type DescriptorDescription,
} from './rule-set.js'
export { ENVOY_UNITS, UNIT_MS, UNIT_NUMBER, isEnvoyUnit, parseUnit, unitOfNumber, type EnvoyUnit } from './units.js'
export { envoyPolicyName } from './schema.js'
export { RuleWatcher, type RuleWatcherOptions } from './watch.js'
