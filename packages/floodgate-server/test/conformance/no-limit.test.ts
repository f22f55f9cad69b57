// Descriptors that match a rule yet get no limit, as envoyproxy/ratelimit answers them: an
// allow-listed value (a value entry with no rate_limit of its own) and a rule that another
// descriptor `replaces`. Over gRPC with the official wire client, over /json, and over /v1/check.
// Neither touches the store, so the memory store alone is enough.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { postJson } from '../service/helpers.js'
import { desc, postJsonApi, startConformance, unique, type Conformance } from './support.js'

const RULES = `
domain: nolimit
descriptors:
  - key: remote_address
    rate_limit: { unit: day, requests_per_unit: 1 }
  # Allow-listed: matched, and no limit of its own.
  - key: remote_address
    value: 10.0.0.1
  - key: free
    rate_limit: { unlimited: true }
  - key: user
    rate_limit: { name: per_user, unit: day, requests_per_unit: 1 }
  - key: partner
    rate_limit: { unit: day, requests_per_unit: 5, replaces: [{ name: per_user }] }
`

const NO_LIMIT = { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null }

describe('conformance: descriptors with no limit (upstream base_limiter.go, ratelimit.go)', () => {
  let c: Conformance
  before(async () => {
    c = await startConformance('memory', RULES)
  })
  after(async () => {
    await c.stop()
  })

  it('an allow-listed value answers OK with limit_remaining 0, as no match does; unlimited: true keeps 4294967295', async () => {
    const response = await c.client.shouldRateLimit({
      domain: 'nolimit',
      descriptors: [desc({ remote_address: '10.0.0.1' }), desc({ free: 'x' }), desc({ unknown: 'x' })],
    })
    assert.equal(response.overall_code, 'OK')
    assert.deepEqual(response.statuses, [
      NO_LIMIT,
      { code: 'OK', current_limit: null, limit_remaining: 4294967295, duration_until_reset: null },
      NO_LIMIT,
    ])
    for (let i = 0; i < 3; i++) {
      const again = await c.client.shouldRateLimit({ domain: 'nolimit', descriptors: [desc({ remote_address: '10.0.0.1' })] })
      assert.equal(again.overall_code, 'OK', 'never counted')
    }
    // Another address is limited by the key-only rule.
    const other = await c.client.shouldRateLimit({ domain: 'nolimit', descriptors: [desc({ remote_address: unique('10.0.0.2') })] })
    assert.equal(other.statuses[0].limit_remaining, 0)
    assert.deepEqual(other.statuses[0].current_limit, { name: '', requests_per_unit: 1, unit: 'DAY' })
    // protobuf JSON omits a 0: upstream's /json answers a bare { code: OK }.
    const json = await postJsonApi(c.service.httpUrl, {
      domain: 'nolimit',
      descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }, { entries: [{ key: 'free', value: 'x' }] }],
    })
    assert.deepEqual(json.json.statuses, [{ code: 'OK' }, { code: 'OK', limitRemaining: 4294967295 }])
  })

  it('/v1/check still reports the allow-listed rule as unlimited, with its id', async () => {
    const res = await postJson(`${c.service.httpUrl}/v1/check`, {
      domain: 'nolimit',
      descriptors: [[{ key: 'remote_address', value: '10.0.0.1' }]],
    })
    assert.deepEqual(res.body.results, [{ allowed: true, rule: 'nolimit.remote_address_10.0.0.1', unlimited: true }])
  })

  it('a replaced rule: /v1/check names it with replaced: true (not rule: null); Envoy answers no limit, as upstream', async () => {
    const user = unique('u')
    const check = await postJson(`${c.service.httpUrl}/v1/check`, {
      domain: 'nolimit',
      descriptors: [[{ key: 'user', value: user }], [{ key: 'partner', value: 'acme' }], [{ key: 'nobody', value: 'x' }]],
    })
    assert.equal(check.status, 200)
    assert.deepEqual(check.body.results[0], { allowed: true, rule: 'nolimit.user', replaced: true })
    assert.equal(check.body.results[1].rule, 'nolimit.partner')
    assert.deepEqual(check.body.results[2], { allowed: true, rule: null }, 'no rule matches: still null')
    // Replaced, so not counted: alone, the per-user limit of 1 still admits once.
    const alone = await postJson(`${c.service.httpUrl}/v1/check`, { domain: 'nolimit', descriptors: [[{ key: 'user', value: user }]] })
    assert.equal(alone.body.results[0].remaining, 0)
    assert.equal(alone.status, 200)
    const grpc = await c.client.shouldRateLimit({
      domain: 'nolimit',
      descriptors: [desc({ user: unique('u') }), desc({ partner: 'acme' })],
    })
    assert.deepEqual(grpc.statuses[0], NO_LIMIT)
    assert.equal(grpc.statuses[1].current_limit?.requests_per_unit, 5)
  })
})
