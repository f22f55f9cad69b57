// Envoy mapping details: policies to RateLimit units, protobuf-JSON durations and omitted defaults, request parsing.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createPolicy } from 'floodgate'
import { envoyLimitOf, toProtoJson, type RlsResponse } from '../../src/service/envoy-response.js'
import { fromProtoJson } from '../../src/service/envoy-request.js'

const policy = (limit: number, period: string) => createPolicy({ name: 'p', algorithm: 'sliding-window', limit, period: period as '1s' })

describe('envoyLimitOf', () => {
  it('maps whole units exactly and other periods to the nearest unit at the same rate', () => {
    assert.deepEqual(envoyLimitOf(policy(10, '1m'), 'n'), { name: 'n', requests_per_unit: 10, unit: 'MINUTE' })
    assert.deepEqual(envoyLimitOf(policy(5, '7d'), 'n'), { name: 'n', requests_per_unit: 5, unit: 'WEEK' })
    assert.deepEqual(envoyLimitOf(policy(100, '10s'), 'n'), { name: 'n', requests_per_unit: 600, unit: 'MINUTE' })
    assert.deepEqual(envoyLimitOf(policy(100, '2s'), 'n'), { name: 'n', requests_per_unit: 50, unit: 'SECOND' })
    assert.deepEqual(envoyLimitOf(policy(2, '10s'), 'n'), { name: 'n', requests_per_unit: 12, unit: 'MINUTE' })
    assert.deepEqual(envoyLimitOf(policy(1, '500ms'), 'n'), { name: 'n', requests_per_unit: 2, unit: 'SECOND' })
    assert.equal(envoyLimitOf(policy(1, '40m'), 'n').requests_per_unit, 2, '1 per 40m → 1.5 per hour, rounded')
    assert.equal(envoyLimitOf(policy(1, '90d'), 'n').unit, 'MONTH')
  })
})

describe('toProtoJson', () => {
  it('writes durations as protojson does and omits default values', () => {
    const response: RlsResponse = {
      overall_code: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OVER_LIMIT',
          current_limit: { name: '', requests_per_unit: 3, unit: 'DAY' },
          limit_remaining: 0,
          duration_until_reset: { seconds: 12, nanos: 0 },
        },
        {
          code: 'OK',
          current_limit: { name: 'x', requests_per_unit: 3, unit: 'SECOND' },
          limit_remaining: 2,
          duration_until_reset: { seconds: 1, nanos: 0 },
        },
        { code: 'OK', current_limit: null, limit_remaining: 4294967295, duration_until_reset: null },
      ],
      response_headers_to_add: [],
      dynamic_metadata: null,
    }
    assert.deepEqual(toProtoJson(response), {
      overallCode: 'OVER_LIMIT',
      statuses: [
        { code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 3, unit: 'DAY' }, durationUntilReset: '12s' },
        { code: 'OK', currentLimit: { requestsPerUnit: 3, unit: 'SECOND', name: 'x' }, limitRemaining: 2, durationUntilReset: '1s' },
        { code: 'OK', limitRemaining: 4294967295 },
      ],
    })
  })
})

describe('fromProtoJson', () => {
  it('accepts camelCase and snake_case names, string uint64s and numeric enums', () => {
    const input = fromProtoJson({
      domain: 'd',
      hitsAddend: '0',
      descriptors: [
        { entries: [{ key: 'a', value: '1' }], hits_addend: '0', limit: { requests_per_unit: 5, unit: 2 } },
        { entries: [{ key: 'b' }], hitsAddend: 3 },
      ],
    })
    assert.deepEqual(input, {
      domain: 'd',
      hits: 1,
      requestHits: 0,
      descriptors: [
        { entries: [{ key: 'a', value: '1' }], hits: 0, limit: { requestsPerUnit: 5, unit: 'MINUTE' } },
        { entries: [{ key: 'b', value: '' }], hits: 3 },
      ],
    })
  })

  it('names the field that is wrong', () => {
    assert.throws(() => fromProtoJson({ domain: 5 }), /^FloodgateError: domain: /)
    assert.throws(() => fromProtoJson({ domain: 'd', descriptors: [{ entries: 'x' }] }), /descriptors\.0\.entries/)
    assert.throws(
      () => fromProtoJson({ domain: 'd', descriptors: [{ entries: [], limit: { requestsPerUnit: 1, unit: 'FORTNIGHT' } }] }),
      /limit\.unit: "FORTNIGHT" is not a unit/,
    )
  })

  it('refuses an unknown field, as protojson does', () => {
    assert.throws(() => fromProtoJson({ domain: 'd', descriptors: [], extra: 1 }), /body: unknown field "extra"/)
    assert.throws(
      () => fromProtoJson({ domain: 'd', descriptors: [{ entries: [{ key: 'a', value: 'b', x: 1 }] }] }),
      /descriptors\.0\.entries\.0: unknown field "x"/,
    )
  })

  // Abuse finding: the unit was looked up with `in` on a plain object, so prototype names passed
  // the check and failed later with a 500; WEEK, which Envoy's proto defines, was refused.
  it('an override unit named like an Object.prototype member is a clear 400-class error; WEEK is a unit', () => {
    for (const unit of ['toString', '__proto__', 'constructor', 'valueOf', 'hasOwnProperty']) {
      assert.throws(
        () => fromProtoJson({ domain: 'd', descriptors: [{ entries: [{ key: 'a', value: 'b' }], limit: { requestsPerUnit: 1, unit } }] }),
        (error: Error & { code?: string }) =>
          error.code === 'INVALID_REQUEST' && error.message.includes(`${JSON.stringify(unit)} is not a unit`),
      )
    }
    const week = fromProtoJson({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'a', value: 'b' }], limit: { requestsPerUnit: 1, unit: 'WEEK' } }],
    })
    assert.deepEqual(week.descriptors[0].limit, { requestsPerUnit: 1, unit: 'WEEK' })
    const byNumber = fromProtoJson({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'a', value: 'b' }], limit: { requestsPerUnit: 0, unit: 7 } }],
    })
    assert.deepEqual(byNumber.descriptors[0].limit, { requestsPerUnit: 0, unit: 'WEEK' }, 'requests_per_unit 0 is a valid override')
  })
})
