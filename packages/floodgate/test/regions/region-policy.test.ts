// The `regions` policy option: validation naming the field, refusals with a reason, and the limit a region decides with.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { FloodgateError } from '../../src/core/errors.js'
import { createPolicies, createPolicy, type PolicyOptions } from '../../src/core/policy.js'
import { demandField, grantField, usedField } from '../../src/regions/crdt.js'
import { forcedChargePolicy, regionalPolicy } from '../../src/regions/region-policy.js'
import { gcra } from '../../src/core/algorithms/gcra.js'

const REGIONS = ['eu', 'us']

function rejects(options: PolicyOptions, field: string, pattern: RegExp): void {
  assert.throws(
    () => createPolicies([options]),
    (error: unknown) =>
      error instanceof FloodgateError &&
      error.code === 'INVALID_POLICY' &&
      error.message.startsWith(`${field}: `) &&
      pattern.test(error.message),
  )
}

describe('the regions option', () => {
  it('is absent unless set, and kept when set', () => {
    assert.equal('regions' in createPolicy({ algorithm: 'fixed-window', limit: 10, period: '1s' }), false)
    assert.equal(createPolicy({ algorithm: 'fixed-window', limit: 10, period: '1s', regions: 'split' }).regions, 'split')
    assert.equal(createPolicy({ algorithm: 'gcra', limit: 10, period: '1s', regions: 'shared' }).regions, 'shared')
  })

  it('names the field for an unknown mode', () => {
    const options: PolicyOptions = { algorithm: 'fixed-window', limit: 10, period: '1s', regions: 'global' as never }
    rejects(options, 'policies[0].regions', /unknown region mode "global"; use one of shared, split/)
  })

  it('refuses algorithms whose usage cannot be merged, with the reason', () => {
    rejects({ algorithm: 'sliding-log', limit: 10, period: '1s', regions: 'shared' }, 'policies[0].regions', /one timestamp/)
    rejects({ algorithm: 'leaky-bucket', limit: 10, period: '1s', regions: 'shared' }, 'policies[0].regions', /Use token-bucket/)
    rejects({ algorithm: 'concurrency', limit: 10, period: '1s', regions: 'split' }, 'policies[0].regions', /in flight/)
    rejects({ algorithm: 'token-bucket', limit: 10, period: '1s', regions: 'split' }, 'policies[0].regions', /a bucket has no window/)
    rejects({ algorithm: 'gcra', limit: 10, period: '1s', regions: 'split' }, 'policies[0].regions', /a bucket has no window/)
    const elastic: PolicyOptions = { algorithm: 'fixed-window', limit: 10, period: '1s', mode: 'elastic', ceiling: 20, regions: 'shared' }
    rejects(elastic, 'policies[0].regions', /elastic/)
  })
})

describe('regionalPolicy', () => {
  const now = 1_700_000_000_500
  const fixed = createPolicy({ algorithm: 'fixed-window', limit: 100, period: '1s', regions: 'shared' })
  const sliding = createPolicy({ algorithm: 'sliding-window', limit: 100, period: '1s', regions: 'shared' })

  it('shared: the limit minus what the other regions admitted in the window, never below 0', () => {
    const current = new Map([
      [usedField('us'), 30],
      [usedField('eu'), 50],
      [demandField('us'), 90],
    ])
    assert.equal(regionalPolicy(fixed, 'shared', { current, previous: new Map() }, REGIONS, 'eu', now).limit, 70)
    const over = new Map([[usedField('us'), 130]])
    assert.equal(regionalPolicy(fixed, 'shared', { current: over, previous: new Map() }, REGIONS, 'eu', now).limit, 0)
  })

  it("shared sliding window: the others' previous window weighs as the region's own does", () => {
    // Half-way through the window: the previous window's 40 weigh 20 (rounded up), plus 10 now.
    const view = { current: new Map([[usedField('us'), 10]]), previous: new Map([[usedField('us'), 40]]) }
    assert.equal(regionalPolicy(sliding, 'shared', view, REGIONS, 'eu', now).limit, 70)
  })

  it('split: the base share plus what the region heard it was handed', () => {
    const split = createPolicy({ algorithm: 'fixed-window', limit: 101, period: '1s', regions: 'split' })
    const empty = { current: new Map(), previous: new Map() }
    assert.equal(regionalPolicy(split, 'split', empty, REGIONS, 'eu', now).limit, 51)
    assert.equal(regionalPolicy(split, 'split', empty, REGIONS, 'us', now).limit, 50)
    const granted = { current: new Map([[grantField('us', 'eu'), 20]]), previous: new Map() }
    assert.equal(regionalPolicy(split, 'split', granted, REGIONS, 'eu', now).limit, 71)
    // The giver's limit stays: it charged the units to its own state before handing them over.
    assert.equal(regionalPolicy(split, 'split', granted, REGIONS, 'us', now).limit, 50)
  })

  it('leaves buckets unchanged, and a forced GCRA charge always goes in as a debt', () => {
    const policy = createPolicy({ algorithm: 'gcra', limit: 10, period: '1s', regions: 'shared' })
    const heard = { current: new Map([[usedField('us'), 5]]), previous: new Map() }
    assert.equal(regionalPolicy(policy, 'shared', heard, REGIONS, 'eu', now), policy)
    const full = gcra.step(undefined, now, 10, policy)
    const forced = gcra.step(full.state, now, 25, forcedChargePolicy(policy))
    assert.equal(forced.allowed, true)
    // The key now owes 25 units: nothing passes for 2.5 s, then one unit per 100 ms again.
    assert.equal(gcra.step(forced.state, now + 2_400, 1, policy).allowed, false)
    assert.equal(gcra.step(forced.state, now + 2_600, 1, policy).allowed, true)
  })
})
