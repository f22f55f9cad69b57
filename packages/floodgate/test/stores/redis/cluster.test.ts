// RedisStore over a real Redis Cluster (3 masters, 3 replicas): decisions across many slots match
// the TypeScript core, keys with braces stay independent, and one tick's calls share script calls.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { Cluster, Redis } from 'ioredis'
import { createPolicies, type Policy } from '../../../src/core/policy.js'
import { evaluateKey, type PolicyRecord } from '../../../src/core/evaluate.js'
import type { EvaluateRequest } from '../../../src/stores/store.js'
import { RedisStore } from '../../../src/redis.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'

// Far from any real clock, moved in whole minutes so windows roll and buckets refill while real
// time (and so Redis' PX expiry, minutes away) stands still.
const START = Date.UTC(2026, 0, 1, 8, 0)
const MINUTE = 60_000

const POLICY_SETS: Policy[][] = [
  createPolicies([{ algorithm: 'fixed-window', limit: 5, period: '10m' }]),
  createPolicies([{ algorithm: 'gcra', limit: 4, period: '10m' }]),
  createPolicies([
    { name: 'sw', algorithm: 'sliding-window', limit: 6, period: '10m' },
    { name: 'tb', algorithm: 'token-bucket', limit: 3, period: '4m' },
  ]),
  createPolicies([{ algorithm: 'sliding-log', limit: 5, period: '10m', blockMs: '5m' }]),
  createPolicies([
    { name: 'lb', algorithm: 'leaky-bucket', limit: 4, period: '10m' },
    { name: 'conc', algorithm: 'concurrency', limit: 3, period: '30m' },
  ]),
]

// Keys whose text tries to move, empty or fake the hash tag, next to the plain keys they resemble.
const AWKWARD_KEYS = ['', '{', '}', '{}', '}{', '{a}', 'a', 'a{b}c', 'b', '{a}{b}', 'x}y{z', '%7B', '%', ':', 'a:b', '{{}}', '🙂{']

let cluster: RedisClusterHandle
let client: Cluster
let store: RedisStore

before(async () => {
  // A long node timeout: on a busy machine a slow node must not be failed over mid-test.
  cluster = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 5000 })
  client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
  store = new RedisStore({ client })
})

after(async () => {
  await store?.close()
  await client?.quit()
  await cluster?.stop()
})

test('decisions for keys spread over every master match evaluateKey, step by step', async () => {
  const keys = [...Array.from({ length: 60 }, (_, i) => `user:${i}`), ...AWKWARD_KEYS]
  const model = new Map<string, PolicyRecord>()
  for (let round = 0; round < 9; round++) {
    const now = START + round * MINUTE
    const requests = keys.map(
      (key, i): EvaluateRequest => ({
        key,
        policies: POLICY_SETS[i % POLICY_SETS.length],
        // Mostly charges, with peeks and double charges mixed in.
        cost: (i + round) % 7 === 0 ? 0 : (i + round) % 5 === 0 ? 2 : 1,
        now,
      }),
    )
    // Separate calls in one tick, as concurrent HTTP requests would make them.
    const responses = await Promise.all(requests.map((request) => store.evaluate([request]).then(([r]) => r)))
    for (const [i, request] of requests.entries()) {
      const expected = decideInModel(model, request, now)
      const actual = responses[i]
      assert.equal(actual.now, now, `round ${round} key ${JSON.stringify(request.key)}: now`)
      assert.equal(actual.allowed, expected.allowed, `round ${round} key ${JSON.stringify(request.key)}: allowed`)
      assert.deepEqual(actual.results, expected.results, `round ${round} key ${JSON.stringify(request.key)}: results`)
    }
  }
  // The keys really were spread: every master holds some of them.
  const masters = await masterPorts()
  assert.equal(masters.length, 3)
  for (const port of masters) {
    const size = await onNode(port, (redis) => redis.dbsize())
    assert.ok(size > 0, `master ${port} holds no keys`)
  }
})

test('keys with braces, colons, percent signs or nothing at all are independent of each other', async () => {
  const policies = createPolicies([{ algorithm: 'fixed-window', limit: 3, period: '1h' }])
  const now = START + 100 * MINUTE
  // Charge every awkward key to its limit: if any two shared state, one would be denied early.
  for (let n = 1; n <= 3; n++) {
    const responses = await store.evaluate(AWKWARD_KEYS.map((key) => ({ key, policies, cost: 1, now })))
    for (const [i, response] of responses.entries()) {
      assert.equal(response.allowed, true, `charge ${n} of ${JSON.stringify(AWKWARD_KEYS[i])}`)
      assert.equal(response.results[0].remaining, 3 - n)
    }
  }
  const denied = await store.evaluate(AWKWARD_KEYS.map((key) => ({ key, policies, cost: 1, now })))
  assert.deepEqual(
    denied.map((r) => r.allowed),
    AWKWARD_KEYS.map(() => false),
  )
  await store.reset('{a}', policies)
  const [afterReset, neighbour] = await store.evaluate([
    { key: '{a}', policies, cost: 1, now },
    { key: 'a', policies, cost: 0, now },
  ])
  assert.equal(afterReset.allowed, true, 'reset of {a} frees it')
  assert.equal(neighbour.results[0].remaining, 0, 'reset of {a} leaves a alone')
})

test('one tick of calls is decided with far fewer script calls than requests, each answer routed to its caller', async (t) => {
  const now = START + 200 * MINUTE
  const count = 300
  const keys = Array.from({ length: count }, (_, i) => `batch${i}`)
  // A different limit per caller: a misrouted answer would show the wrong remaining.
  const policiesOf = (i: number): Policy[] => createPolicies([{ algorithm: 'gcra', limit: 2 + (i % 9), period: '1h' }])
  // Warm up so every node has the script cached and no NOSCRIPT retry is counted.
  await Promise.all(keys.map((key, i) => store.evaluate([{ key: `warm-${key}`, policies: policiesOf(i), cost: 0, now }])))
  const masters = await masterPorts()
  await Promise.all(masters.map((port) => onNode(port, (redis) => redis.config('RESETSTAT'))))

  const responses = await Promise.all(
    keys.map((key, i) => store.evaluate([{ key, policies: policiesOf(i), cost: 1, now }]).then(([r]) => r)),
  )
  for (const [i, response] of responses.entries()) {
    assert.equal(response.allowed, true)
    assert.equal(response.results[0].remaining, 1 + (i % 9), `caller ${i} got someone else's answer`)
  }
  const calls = (await Promise.all(masters.map((port) => onNode(port, scriptCalls)))).reduce((a, b) => a + b, 0)
  const slots = new Set(await onNode(masters[0], (redis) => Promise.all(keys.map((key) => redis.call('CLUSTER', 'KEYSLOT', `{${key}}`)))))
  t.diagnostic(`${count} requests over ${slots.size} slots took ${calls} script calls`)
  assert.ok(calls >= 1, 'no script call was counted')
  assert.ok(calls <= slots.size, `${calls} script calls for ${slots.size} distinct slots: not batched per slot`)
  assert.ok(calls < count / 2, `${calls} script calls for ${count} requests`)
})

/** The TypeScript core's decision for a request, updating the model's records like a store would. */
function decideInModel(model: Map<string, PolicyRecord>, request: EvaluateRequest, now: number) {
  const ids = request.policies.map((policy) => `${request.key}\u0000${policy.name}`)
  const evaluation = evaluateKey(
    ids.map((id) => model.get(id)),
    now,
    request.cost,
    request.policies,
  )
  // Records are never dropped here: by the ttlMs contract a record past its ttl steps like none.
  for (const [i, id] of ids.entries()) model.set(id, evaluation.records[i])
  return evaluation
}

async function masterPorts(): Promise<number[]> {
  const ranges = (await onNode(cluster.nodes[0].port, (redis) => redis.call('CLUSTER', 'SLOTS'))) as [number, number, [string, number]][]
  return [...new Set(ranges.map((range) => Number(range[2][1])))].sort()
}

async function scriptCalls(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats')
  let total = 0
  for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro):calls=(\d+)/gm)) total += Number(match[1])
  return total
}

async function onNode<T>(port: number, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await redis.connect()
    return await work(redis)
  } finally {
    redis.disconnect()
  }
}
