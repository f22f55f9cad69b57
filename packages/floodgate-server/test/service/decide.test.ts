// The Decider's answer for an upstream-format (`rate_limit`) descriptor: the store's decision, restated for the rule.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { Decision, LimitOptions, Policy } from 'floodgate'
import { parseRules } from 'floodgate/rules'
import { Decider } from '../../src/service/decide.js'

const RULES = parseRules([
  {
    file: 'rules.yaml',
    text: `
domain: test
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
`,
  },
])

/** A limiter answering every call with the counter decision `counted` builds from the call's policy. */
function limiterAnswering(counted: (policy: Policy, cost: number) => Decision) {
  const calls: { key: string; options: LimitOptions | undefined }[] = []
  return {
    calls,
    limit: async (key: string, options?: LimitOptions) => {
      calls.push({ key, options })
      return counted(options!.policies![0], options!.cost ?? 1)
    },
    reset: async () => {},
  }
}

/** The counter's decision after `count` hits, with every field a store may set (a lease too). */
function counterDecision(policy: Policy, count: number): Decision {
  const part = {
    name: policy.name,
    algorithm: policy.algorithm,
    limit: policy.limit,
    periodMs: policy.periodMs,
    allowed: true,
    remaining: policy.limit - count,
    resetMs: 42_000,
    retryAfterMs: 0,
    delayMs: 0,
    blocked: false,
    over: false,
    shadow: false,
  }
  return {
    allowed: true,
    limit: policy.limit,
    remaining: policy.limit - count,
    resetMs: 42_000,
    retryAfterMs: 0,
    delayMs: 0,
    policy: policy.name,
    over: false,
    shadow: false,
    source: 'store',
    policies: [part],
    lease: { key: 'k', cost: 1, policies: [policy.name] },
  }
}

describe('Decider, upstream-format rules', () => {
  it("restates the counter's decision with the rule's limit, keeping every other field the store gave", async () => {
    const limiter = limiterAnswering((policy) => counterDecision(policy, 3))
    const decider = new Decider({ rules: () => RULES, limiter })
    const result = await decider.decide({ domain: 'test', hits: 1, descriptors: [{ entries: [{ key: 'user', value: 'a' }] }] })
    const outcome = result.outcomes[0]
    assert.equal(outcome.kind, 'limited')
    if (outcome.kind !== 'limited') return
    const counted = counterDecision(outcome.policy, 3)
    assert.deepEqual(outcome.decision, {
      ...counted,
      limit: 5,
      remaining: 2,
      policies: [{ ...counted.policies[0], limit: 5, remaining: 2 }],
    })
    assert.deepEqual(outcome.envoy, { unit: 'MINUTE', requestsPerUnit: 5, name: '', count: 3, over: false })
  })

  it('over the rule: denied, nothing remaining, the reset as the wait; past the rate itself: never, no wait', async () => {
    const limiter = limiterAnswering((policy, cost) => counterDecision(policy, 5 + cost))
    const decider = new Decider({ rules: () => RULES, limiter })
    const input = (hits: number) => ({ domain: 'test', hits, descriptors: [{ entries: [{ key: 'user', value: 'a' }] }] })
    const over = await decider.decide(input(1))
    const denied = over.outcomes[0]
    assert.equal(over.allowed, false)
    assert.ok(denied.kind === 'limited')
    assert.deepEqual(
      [denied.decision.allowed, denied.decision.remaining, denied.decision.retryAfterMs, denied.decision.never],
      [false, 0, 42_000, undefined],
    )
    assert.deepEqual([denied.decision.policies[0].allowed, denied.decision.policies[0].retryAfterMs], [false, 42_000])
    const never = (await decider.decide(input(6))).outcomes[0]
    assert.ok(never.kind === 'limited')
    assert.deepEqual([never.decision.never, never.decision.retryAfterMs, never.decision.policies[0].never], [true, 0, true])
  })

  it('asks the limiter with the same counter policies every time (one per unit and rate)', async () => {
    const limiter = limiterAnswering((policy) => counterDecision(policy, 1))
    const decider = new Decider({ rules: () => RULES, limiter })
    for (const value of ['a', 'b', 'a']) {
      await decider.decide({ domain: 'test', hits: 1, descriptors: [{ entries: [{ key: 'user', value }] }] })
    }
    const [first, ...rest] = limiter.calls.map((call) => call.options?.policies)
    for (const policies of rest) assert.equal(policies, first)
  })
})
