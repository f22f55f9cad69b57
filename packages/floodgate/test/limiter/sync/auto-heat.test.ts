// sync: 'auto' choosing its hot keys, replayed on an injected clock with no store: how much of a
// Zipf trace it decides from leases when the process is slow and when it is fast, and that uniform
// lukewarm keys stay exact.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createPolicy } from '../../../src/core/policy.js'
import { AutoSync } from '../../../src/limiter/sync/auto-sync.js'
import type { LeaseSync } from '../../../src/limiter/sync/lease-sync.js'
import type { LeaseStore } from '../../../src/stores/store.js'
import { zipfRanks } from '../../support/zipf.js'

const POLICIES = [createPolicy({ algorithm: 'fixed-window', limit: 1_000_000_000, period: '1h', sync: 'auto' })]
const ZIPF = zipfRanks(100_000, 1.1)

// Replays `seconds` of `keyOf` at `perSecond` decisions a second through AutoSync (default hotRate,
// leaseMs and maxKeys), and reads the second half: the share of decisions made while their key was
// hot (the lease engine asked), and how many keys went back to exact a second (each a lease returned).
function replay(keyOf: (i: number) => string, perSecond: number, seconds: number): { share: number; dropsPerSecond: number } {
  let now = 0
  let hot = 0
  let drops = 0
  const leases = {
    find: () => undefined,
    holding: () => ({ seed: () => {} }),
    tryLocal: () => void hot++,
    drop: () => void drops++,
  } as unknown as LeaseSync
  const auto = new AutoSync({ store: {} as LeaseStore, leases, clock: () => now })
  const decisions = perSecond * seconds
  for (let i = 0; i < decisions; i++) {
    now = (i * 1000) / perSecond
    if (i === decisions / 2) hot = drops = 0
    auto.tryLocal(keyOf(i), POLICIES, 1)
  }
  return { share: hot / (decisions / 2), dropsPerSecond: drops / (seconds / 2) }
}

const zipfKey = (i: number) => `z:${ZIPF[i & (ZIPF.length - 1)]}`

describe("sync: 'auto' heat on a Zipf trace and on lukewarm keys", () => {
  it('leases at least 0.65 of Zipf(1.1) decisions at 15,000/s, and about as much as at 300,000/s', () => {
    const slow = replay(zipfKey, 15_000, 16)
    const fast = replay(zipfKey, 300_000, 8)
    // A lease pays for itself on a key asked several times in one lease time, whatever the pace: at
    // 15,000/s the 300 hottest keys are, at 300,000/s some 4,000 (docs/sync.md, Auto).
    assert.ok(slow.share >= 0.65, `share at 15,000/s: ${slow.share.toFixed(3)}`)
    assert.ok(fast.share >= 0.8, `share at 300,000/s: ${fast.share.toFixed(3)}`)
    assert.ok(slow.share / fast.share >= 0.78, `shares ${slow.share.toFixed(3)} and ${fast.share.toFixed(3)}`)
  })

  it('keeps uniform lukewarm keys (10,000 at 2 a second each) exact, hardly any flapping onto leases', () => {
    let seed = 12345
    const uniform = replay(
      () => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
        return `u:${seed % 10_000}`
      },
      20_000,
      60,
    )
    // The threshold is lower than it was (5 a second, not 8), and flaps less: 0.4 keys a second, not 1.4.
    assert.ok(uniform.share < 0.001, `share decided hot: ${uniform.share}`)
    assert.ok(uniform.dropsPerSecond <= 0.5, `keys back to exact a second: ${uniform.dropsPerSecond}`)
  })
})
