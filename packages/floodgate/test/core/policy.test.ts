// Tests of policy validation: defaults, and every invalid option rejected with a message naming the field.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ALGORITHMS, createPolicies, createPolicy, type PolicyOptions } from '../../src/core/policy.js'
import { FloodgateError, type FloodgateErrorCode } from '../../src/core/errors.js'

const base: PolicyOptions = { algorithm: 'token-bucket', limit: 10, period: '1s' }

/** Asserts that `run` throws a FloodgateError whose message starts with `field: ` and matches `pattern`. */
function assertRejects(run: () => unknown, field: string, pattern: RegExp, code: FloodgateErrorCode = 'INVALID_POLICY'): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof FloodgateError, String(error))
    assert.equal(error.code, code)
    assert.ok(error.message.startsWith(`${field}: `), `"${error.message}" should start with "${field}: "`)
    assert.match(error.message, pattern)
    return true
  })
}

/** createPolicy on base options with `changes` applied (an `undefined` value removes the option). */
function policyWith(changes: Record<string, unknown>) {
  return () => createPolicy({ ...base, ...changes } as PolicyOptions)
}

describe('createPolicy: valid policies', () => {
  it('fills in defaults and parses the period', () => {
    assert.deepEqual(createPolicy({ algorithm: 'gcra', limit: 10, period: '1m' }), {
      name: 'gcra-10-per-1m',
      algorithm: 'gcra',
      limit: 10,
      periodMs: 60_000,
      burst: 10,
      shaping: false,
      mode: 'hard',
      overage: 0,
      ceiling: 10,
      blockMs: 0,
      shadow: false,
      sync: 'always',
      flushMs: 50,
      leaseMs: 1000,
      leaseMax: 1,
      hotRate: 12,
    })
  })

  it('keeps every option given', () => {
    const policy = createPolicy({
      name: 'uploads',
      algorithm: 'leaky-bucket',
      limit: 5,
      period: 2_000,
      burst: 20,
      shaping: true,
      mode: 'soft',
      overage: 0.25,
      blockMs: '30s',
      shadow: true,
    })
    assert.deepEqual(
      [policy.name, policy.periodMs, policy.burst, policy.shaping, policy.mode, policy.overage, policy.blockMs, policy.shadow],
      ['uploads', 2_000, 20, true, 'soft', 0.25, 30_000, true],
    )
    assert.equal(createPolicy({ ...base, mode: 'elastic', ceiling: 25 }).ceiling, 25)
  })

  it('accepts every algorithm it lists', () => {
    for (const algorithm of ALGORITHMS) assert.equal(createPolicy({ ...base, algorithm }).algorithm, algorithm)
  })

  it('returns a frozen policy', () => {
    const policy = createPolicy(base)
    assert.ok(Object.isFrozen(policy))
    assert.throws(() => {
      ;(policy as { limit: number }).limit = 99
    }, TypeError)
  })
})

describe('createPolicy: invalid options name the field', () => {
  it('rejects something that is not an object', () => {
    for (const value of [null, 'gcra', 10, undefined]) {
      assertRejects(() => createPolicy(value as unknown as PolicyOptions), 'policy', /expected an object/)
    }
  })

  it('rejects an unknown option, listing the known ones', () => {
    assertRejects(policyWith({ rate: 5 }), 'policy.rate', /unknown option; known options are name, algorithm, limit, period, burst/)
  })

  it('rejects an unknown or missing algorithm, listing the algorithms', () => {
    assertRejects(
      policyWith({ algorithm: 'leaky' }),
      'policy.algorithm',
      /unknown algorithm "leaky"; use one of fixed-window, sliding-window/,
    )
    assertRejects(policyWith({ algorithm: undefined }), 'policy.algorithm', /unknown algorithm/)
  })

  it('takes a fixed-window limit of 0 (deny everything, as requests_per_unit: 0) and no other', () => {
    assert.equal(createPolicy({ algorithm: 'fixed-window', limit: 0, period: '1m' }).limit, 0)
    for (const algorithm of ALGORITHMS.filter((name) => name !== 'fixed-window')) {
      assertRejects(() => createPolicy({ algorithm, limit: 0, period: '1m' }), 'policy.limit', /greater than 0/)
    }
  })

  it('rejects a limit that is not a whole number above 0', () => {
    for (const limit of [0, -1, 1.5, '10', Number.NaN, Number.POSITIVE_INFINITY, undefined]) {
      assertRejects(policyWith({ limit }), 'policy.limit', /must be a whole number greater than 0/)
    }
  })

  it('rejects a period that is not a positive duration', () => {
    for (const period of [0, -1_000, '0s', 'soon', undefined]) {
      assertRejects(policyWith({ period }), 'policy.period', /duration|greater than 0/, 'INVALID_DURATION')
    }
  })

  it('rejects a burst below 1 or not whole', () => {
    for (const burst of [0, -3, 0.5, 2.5, '5']) {
      assertRejects(policyWith({ burst }), 'policy.burst', /burst must be at least 1/)
    }
  })

  it('rejects shaping that is not a boolean, or on an algorithm other than leaky-bucket', () => {
    assertRejects(policyWith({ algorithm: 'leaky-bucket', shaping: 'yes' }), 'policy.shaping', /must be true or false/)
    assertRejects(policyWith({ shaping: true }), 'policy.shaping', /only applies to leaky-bucket, not token-bucket/)
    assert.equal(createPolicy({ ...base, shaping: false }).shaping, false)
  })

  it('rejects an unknown mode', () => {
    assertRejects(policyWith({ mode: 'medium' }), 'policy.mode', /unknown mode "medium"; use hard, soft or elastic/)
  })

  it('rejects soft mode without a positive overage, and an overage outside soft mode', () => {
    for (const overage of [undefined, 0, -0.1, Number.NaN, '10%']) {
      assertRejects(policyWith({ mode: 'soft', overage }), 'policy.overage', /soft mode needs overage > 0/)
    }
    assertRejects(policyWith({ overage: 0.1 }), 'policy.overage', /only applies to mode 'soft'/)
  })

  it('rejects elastic mode without a whole ceiling at or above the limit, and a ceiling outside elastic mode', () => {
    assertRejects(policyWith({ mode: 'elastic' }), 'policy.ceiling', /must be a whole number greater than 0/)
    assertRejects(policyWith({ mode: 'elastic', ceiling: 12.5 }), 'policy.ceiling', /whole number/)
    assertRejects(policyWith({ mode: 'elastic', ceiling: 9 }), 'policy.ceiling', /must be at least the limit \(10\), got 9/)
    assertRejects(policyWith({ ceiling: 20 }), 'policy.ceiling', /only applies to mode 'elastic'/)
  })

  it('rejects a block duration that is not a positive duration', () => {
    assertRejects(policyWith({ blockMs: 'forever' }), 'policy.blockMs', /is not a duration/, 'INVALID_DURATION')
    assertRejects(policyWith({ blockMs: -1 }), 'policy.blockMs', /greater than 0/, 'INVALID_DURATION')
  })

  it('rejects shadow that is not a boolean', () => {
    assertRejects(policyWith({ shadow: 1 }), 'policy.shadow', /must be true or false/)
  })

  it('rejects an empty or non-string name', () => {
    assertRejects(policyWith({ name: '' }), 'policy.name', /non-empty string/)
    assertRejects(policyWith({ name: 42 }), 'policy.name', /non-empty string/)
  })

  it('prefixes the field with where the policy came from', () => {
    assertRejects(() => createPolicy({ ...base, limit: 0 }, 'rules.api.policies[2]'), 'rules.api.policies[2].limit', /greater than 0/)
  })
})

describe('createPolicies', () => {
  it('validates each policy and keeps their order', () => {
    const policies = createPolicies([
      { ...base, name: 'second', limit: 10 },
      { ...base, name: 'hour', limit: 500, period: '1h' },
    ])
    assert.deepEqual(
      policies.map((p) => [p.name, p.periodMs]),
      [
        ['second', 1_000],
        ['hour', 3_600_000],
      ],
    )
  })

  it('rejects an empty list or something that is not a list', () => {
    assertRejects(() => createPolicies([]), 'policies', /at least one policy/)
    assertRejects(() => createPolicies(base as unknown as PolicyOptions[]), 'policies', /at least one policy/)
  })

  it('names the index of the invalid policy', () => {
    assertRejects(
      () => createPolicies([base, { ...base, name: 'b', period: '0s' }]),
      'policies[1].period',
      /greater than 0/,
      'INVALID_DURATION',
    )
  })

  it('rejects duplicate names, including two identical unnamed policies', () => {
    assertRejects(
      () =>
        createPolicies([
          { ...base, name: 'api' },
          { ...base, name: 'other' },
          { ...base, name: 'api', limit: 5 },
        ]),
      'policies[2].name',
      /duplicate policy name "api"; give each policy its own name/,
    )
    assertRejects(() => createPolicies([base, base], 'limits'), 'limits[1].name', /duplicate policy name "token-bucket-10-per-1s"/)
  })
})

describe('createPolicy: sync', () => {
  it('defaults to always and reads each mode with its knobs', () => {
    assert.equal(createPolicy(base).sync, 'always')
    const lease = createPolicy({ ...base, limit: 100, sync: 'lease', leaseMs: '200ms' })
    assert.deepEqual([lease.sync, lease.leaseMs, lease.leaseMax], ['lease', 200, 12])
    const auto = createPolicy({ ...base, sync: 'auto', hotRate: 500, leaseMax: 5 })
    assert.deepEqual([auto.sync, auto.hotRate, auto.leaseMax], ['auto', 500, 5])
    assert.equal(createPolicy({ ...base, sync: 'write-back', flushMs: '100ms' }).flushMs, 100)
    for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket', 'gcra', 'concurrency'] as const) {
      assert.equal(createPolicy({ algorithm, limit: 10, period: '1s', sync: 'lease' }).sync, 'lease')
    }
  })

  it('refuses an unknown mode and knobs of another mode, naming the field', () => {
    assertRejects(
      policyWith({ sync: 'sometimes' }),
      'policy.sync',
      /unknown sync mode "sometimes"; use one of always, lease, write-back, auto/,
    )
    assertRejects(policyWith({ flushMs: 10 }), 'policy.flushMs', /only applies to sync 'write-back', not always/)
    assertRejects(policyWith({ sync: 'write-back', leaseMs: 10 }), 'policy.leaseMs', /only applies to sync 'lease' and 'auto'/)
    assertRejects(policyWith({ sync: 'lease', hotRate: 10 }), 'policy.hotRate', /only applies to sync 'auto', not lease/)
    assertRejects(policyWith({ sync: 'auto', hotRate: 0 }), 'policy.hotRate', /greater than 0, got 0/)
    assertRejects(policyWith({ sync: 'lease', leaseMax: 11 }), 'policy.leaseMax', /at most .* \(10\), got 11/)
    assertRejects(policyWith({ sync: 'lease', leaseMax: 1.5 }), 'policy.leaseMax', /whole number/)
    assertRejects(policyWith({ sync: 'lease', leaseMs: 'soon' }), 'policy.leaseMs', /./, 'INVALID_DURATION')
  })

  it('refuses lease and auto where a block spent later would break the guarantee, with the reason', () => {
    for (const sync of ['lease', 'auto'] as const) {
      assertRejects(
        policyWith({ algorithm: 'sliding-log', sync }),
        'policy.sync',
        new RegExp(`${sync} is not sound for this policy: sliding-log`),
      )
      assertRejects(policyWith({ algorithm: 'leaky-bucket', sync }), 'policy.sync', /use token-bucket \(the same policing\)/)
      assertRejects(policyWith({ algorithm: 'leaky-bucket', shaping: true, sync }), 'policy.sync', /only the store can hand out/)
      assertRejects(policyWith({ mode: 'elastic', ceiling: 20, sync }), 'policy.sync', /shared pool/)
      assertRejects(policyWith({ blockMs: '1s', sync }), 'policy.sync', /block period/)
    }
  })
})

describe('createPolicies: sync', () => {
  it('refuses policies of one key kept by different sync modes', () => {
    assertRejects(
      () =>
        createPolicies([
          { ...base, name: 'a', sync: 'lease' },
          { ...base, name: 'b' },
        ]),
      'policies[1].sync',
      /is always but a is lease; .* give them the same sync mode/,
    )
  })
})
