// The example the service runs with `npm start` loads and does what its comments say.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { loadRules } from '../../src/rules.js'
import { d } from './support.js'

describe('examples/rules.yaml', () => {
  const set = loadRules(join(import.meta.dirname, '../../../../examples/rules.yaml'))
  const one = (...pairs: string[]) => set.match('edge', [d(...pairs)])[0]

  it('limits every IP, allow-lists the internal range, and raises the office ranges', () => {
    assert.equal(one('remote_address=198.51.100.1')?.policies[0].limit, 50)
    assert.equal(one('remote_address=198.51.100.1')?.id, 'edge.remote_address')
    assert.equal(one('remote_address=10.0.4.2')?.unlimited, true)
    assert.equal(one('remote_address=192.168.7.1')?.policies[0].limit, 200)
    assert.equal(one('remote_address=192.168.1.7')?.policies[0].limit, 500)
  })

  it('has a per-user limit that a partner key replaces', () => {
    assert.equal(one('user=ann')?.name, 'per_user')
    const [user, partner] = set.match('edge', [d('user=ann'), d('api_key=partner-acme')])
    assert.equal(user, undefined)
    assert.equal(partner?.policies[0].limit, 6000)
  })

  it('gives free and premium plans a burst + sustained pair, and internal no limit', () => {
    const free = one('plan=free', 'user=ann')
    const premium = one('plan=premium', 'user=ann')
    assert.deepEqual(
      free?.policies.map((p) => `${p.name}:${p.algorithm}:${p.limit}/${p.periodMs}`),
      ['burst:token-bucket:5/1000', 'sustained:sliding-window:1000/3600000'],
    )
    assert.deepEqual(
      premium?.policies.map((p) => `${p.name}:${p.algorithm}:${p.limit}/${p.periodMs}`),
      ['burst:gcra:50/1000', 'sustained:sliding-window:50000/3600000'],
    )
    assert.equal(one('plan=internal')?.unlimited, true)
  })

  it('runs the search limit in shadow mode', () => {
    const search = one('path=/api/search')
    assert.equal(search?.shadow, true)
    assert.equal(search?.policies[0].shadow, true)
  })
})
