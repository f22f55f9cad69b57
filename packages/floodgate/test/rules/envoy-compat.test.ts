// Configs written for envoyproxy/ratelimit load unchanged and match the way it matches.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { loadRules, parseRules } from '../../src/rules.js'
import { d } from './support.js'

const EXAMPLES = join(import.meta.dirname, '../../../../examples/envoy')

describe('envoyproxy/ratelimit example configs', () => {
  const set = loadRules(EXAMPLES)

  it('every example file loads on its own and the directory loads as one snapshot', () => {
    const files = readdirSync(EXAMPLES).filter((name) => name.endsWith('.yaml'))
    assert.ok(files.length >= 5)
    for (const file of files) assert.equal(loadRules(join(EXAMPLES, file)).domains.size, 1)
    assert.deepEqual([...set.domains].sort(), ['api', 'edge_proxy_per_ip', 'messaging', 'mongo_cla', 'storage', 'webapp'])
  })

  it('quota_mode, share_threshold, value_to_metric and metadata (storage)', () => {
    const [tenant, a, b, route] = set.match('storage', [
      d('tenant=acme'),
      d('object=tmp/a'),
      d('object=tmp/b/c'),
      d('route=/upload', 'method=PUT'),
    ])
    assert.equal(tenant?.quota, true)
    assert.deepEqual(tenant?.metadata, { plan: { name: 'standard' } })
    assert.equal(a?.storeKey, b?.storeKey)
    assert.equal(a?.metricKey, 'storage.object_tmp/*')
    assert.equal(route?.metricKey, 'storage.route_/upload.method')
  })

  it('exact values (database)', () => {
    const [users, other] = set.match('mongo_cla', [d('database=users'), d('database=logs')])
    assert.deepEqual(users?.envoyLimit, { unit: 'SECOND', requestsPerUnit: 500 })
    assert.equal(users?.id, 'mongo_cla.database_users')
    assert.equal(other, undefined)
  })

  it('nested descriptors (messaging)', () => {
    const [marketing, direct, bare] = set.match('messaging', [
      d('message_type=marketing', 'to_number=2061111111'),
      d('to_number=2061111111'),
      d('message_type=marketing'),
    ])
    assert.deepEqual(marketing?.envoyLimit, { unit: 'DAY', requestsPerUnit: 5 })
    assert.equal(marketing?.id, 'messaging.message_type_marketing.to_number')
    assert.equal(marketing?.storeKey, 'messaging|message_type=marketing|to_number=2061111111')
    assert.deepEqual(direct?.envoyLimit, { unit: 'DAY', requestsPerUnit: 100 })
    assert.equal(bare, undefined)
  })

  it('per-IP default, a specific address, an allow-listed range, a nested pair (edge proxy)', () => {
    const [any, special, health, unauthenticated, authenticated] = set.match('edge_proxy_per_ip', [
      d('remote_address=203.0.113.9'),
      d('remote_address=50.0.0.5'),
      d('remote_address=172.16.0.4'),
      d('authenticated=false', 'remote_address=203.0.113.9'),
      d('authenticated=true', 'remote_address=203.0.113.9'),
    ])
    assert.equal(any?.policies[0].limit, 10)
    assert.equal(any?.storeKey, 'edge_proxy_per_ip|remote_address=203.0.113.9')
    assert.equal(special?.policies[0].limit, 100)
    assert.equal(health?.unlimited, true)
    assert.deepEqual(unauthenticated?.envoyLimit, { unit: 'MINUTE', requestsPerUnit: 60 })
    assert.equal(authenticated, undefined)
  })

  it('shadow_mode and replaces (webapp)', () => {
    const [global, key, batch] = set.match('webapp', [d('generic_key=global'), d('api_key=k1'), d('client=batch')])
    assert.equal(global?.shadow, true)
    assert.equal(key, undefined) // replaced by the batch rule of the same request
    assert.equal(batch?.name, 'batch')
    assert.equal(set.match('webapp', [d('api_key=k1')])[0]?.name, 'per_api_key')
  })

  it('unlimited, wildcard and detailed_metric (api)', () => {
    const [internal, other, file, upload] = set.match('api', [
      d('client_id=internal-batch'),
      d('client_id=acme'),
      d('path=/v1/files/report.pdf'),
      d('path=/v1/files/upload'),
    ])
    assert.equal(internal?.unlimited, true)
    assert.equal(other?.detailedMetric, true)
    assert.equal(other?.policies[0].limit, 50)
    assert.equal(file?.policies[0].limit, 30)
    assert.equal(file?.id, 'api.path_/v1/files/*')
    assert.equal(upload?.policies[0].limit, 5)
  })

  it('YAML anchors and merge keys, as the Go YAML parser accepts them', () => {
    const merged = parseRules([
      {
        file: 'anchors.yaml',
        text: `domain: anchors
descriptors:
  - key: a
    rate_limit: &per_second
      unit: second
      requests_per_unit: 7
  - key: b
    rate_limit: *per_second
  - key: c
    rate_limit:
      <<: *per_second
      requests_per_unit: 9
`,
      },
    ])
    assert.deepEqual(
      merged.match('anchors', [d('a=1'), d('b=1'), d('c=1')]).map((rule) => rule?.envoyLimit),
      [
        { unit: 'SECOND', requestsPerUnit: 7 },
        { unit: 'SECOND', requestsPerUnit: 7 },
        { unit: 'SECOND', requestsPerUnit: 9 },
      ],
    )
  })

  it('numbers and booleans in values read as the text written, as upstream reads them into strings', () => {
    const set = parseRules([
      {
        file: 'n.yaml',
        text:
          'domain: n\ndescriptors:\n  - key: port\n    value: 8080\n    rate_limit: { unit: second, requests_per_unit: 1 }\n' +
          '  - key: flag\n    value: true\n    rate_limit: { unit: second, requests_per_unit: 2 }\n',
      },
    ])
    assert.equal(set.match('n', [d('port=8080')])[0]?.policies[0].limit, 1)
    assert.equal(set.match('n', [d('flag=true')])[0]?.policies[0].limit, 2)
  })
})
