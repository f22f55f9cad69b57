// Issue 26 §1, on the service: a request is admitted only if its cost was charged, on every path
// (/v1/check, /json, gRPC through a real grpc-js client), for any hits addend in [0, 2^64).

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { ALGORITHMS } from 'floodgate'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { postJson, rlsClients, startTestService, type TestService } from './helpers.js'

const T0 = 1_700_000_000_000
const UINT64_MAX = 2n ** 64n - 1n
/** The costs that slipped through before: past the counter's ceiling (1e15), past 2^53, and int64/uint64 edges. */
const EDGES = [
  1n,
  10n,
  11n,
  10n ** 15n,
  10n ** 15n + 1n,
  2n * 10n ** 15n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 53n + 1n,
  2n ** 63n - 1n,
  UINT64_MAX,
]

/** One upstream-format rule (the never-denying counter) and one `limits:` rule per algorithm, all 10 per hour. */
const RULES = `
domain: cost
descriptors:
  - key: upstream
    rate_limit: { unit: hour, requests_per_unit: 10 }
${ALGORITHMS.map((algorithm) => `  - key: ${algorithm}\n    limits: [{ algorithm: ${algorithm}, limit: 10, period: 1h }]`).join('\n')}
`
const RULE_KEYS = ['upstream', ...ALGORITHMS]

/** Mostly costs around the limit (so both answers occur), then the edges, then anything in [0, 2^64). */
const cost = fc.oneof(
  { arbitrary: fc.bigInt({ min: 0n, max: 12n }), weight: 3 },
  { arbitrary: fc.constantFrom(...EDGES), weight: 2 },
  { arbitrary: fc.bigInt({ min: 0n, max: UINT64_MAX }), weight: 2 },
)

type Path = 'check' | 'json' | 'grpc'
const PATHS: Path[] = ['check', 'json', 'grpc']

/** What one call answered: admitted or not, the remaining it reports, and the seconds until reset (0 when not said). */
interface Answer {
  allowed: boolean
  remaining: number
  resetSeconds: number
}

/** Calls one path of a running service for one descriptor `{ rule: value }` with `hits` (0 checks without charging). */
function caller(service: TestService, grpc: ReturnType<typeof rlsClients>) {
  return async (path: Path, rule: string, value: string, hits: bigint): Promise<Answer> => {
    const entries = [{ key: rule, value }]
    if (path === 'check') {
      const response = await postJson(`${service.httpUrl}/v1/check`, { domain: 'cost', descriptors: [entries], hits: Number(hits) })
      assert.ok(response.status === 200 || response.status === 429, `check: ${response.status} ${JSON.stringify(response.body)}`)
      const result = response.body.results[0]
      return { allowed: result.allowed, remaining: result.remaining, resetSeconds: Math.ceil(result.resetMs / 1000) }
    }
    if (path === 'json') {
      // protojson takes a uint64 as a string or a number: a number while it is exact.
      const hitsAddend = hits <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(hits) : String(hits)
      const response = await postJson(`${service.httpUrl}/json`, { domain: 'cost', descriptors: [{ entries, hitsAddend }] })
      assert.ok(response.status === 200 || response.status === 429, `json: ${response.status} ${JSON.stringify(response.body)}`)
      const status = response.body.statuses[0]
      return {
        allowed: status.code === 'OK',
        remaining: status.limitRemaining ?? 0,
        resetSeconds: Number.parseInt(status.durationUntilReset ?? '0', 10),
      }
    }
    const response = await grpc.shouldRateLimit({ domain: 'cost', descriptors: [{ entries, hits_addend: { value: String(hits) } }] })
    const status = response.statuses[0]
    return {
      allowed: status.code === 'OK',
      remaining: status.limit_remaining,
      resetSeconds: Number(status.duration_until_reset?.seconds ?? 0),
    }
  }
}

/**
 * The property, on one path and rule: each request is either denied, or admitted with its cost
 * charged (a check with 0 hits before and after it sees `remaining` drop by exactly the cost).
 * `rolled` tells a window that restarted between the checks (a store on a real clock): that
 * sample says nothing and is skipped.
 */
async function assertAdmittedOnlyIfCharged(call: ReturnType<typeof caller>, paths: Path[], rules: string[], numRuns: number) {
  let run = 0
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...paths), fc.constantFrom(...rules), cost, async (path, rule, hits) => {
      // A few keys per rule, so that some fill up and later costs meet a spent key.
      const value = `${path}-${run++ % 4}`
      const before = await call(path, rule, value, 0n)
      const answer = await call(path, rule, value, hits)
      const after = await call(path, rule, value, 0n)
      if (after.resetSeconds > before.resetSeconds + 1) return
      if (answer.allowed) {
        assert.ok(hits <= 10n, `${path} ${rule}: admitted ${hits} hits on a limit of 10`)
        assert.equal(
          before.remaining - after.remaining,
          Number(hits),
          `${path} ${rule}: admitted ${hits} hits, charged ${before.remaining - after.remaining}`,
        )
      }
    }),
    { numRuns, includeErrorInReport: true },
  )
}

/**
 * Waits (up to 10 s) until the service is ready and answers a check: a decision made before the
 * store is connected would be the failure mode's (admitted, uncharged by design).
 */
async function untilAnswered(service: TestService): Promise<void> {
  const body = { domain: 'cost', descriptors: [{ entries: [{ key: 'upstream', value: 'ready' }], hitsAddend: 0 }] }
  for (let tries = 0; tries < 200; tries++) {
    const ready = ((await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string }).status === 'ready'
    if (ready && (await postJson(`${service.httpUrl}/json`, body)).status === 200) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail('the service did not answer from its store within 10 s')
}

describe('a cost the store cannot charge is denied, never admitted (embedded store)', () => {
  let service: TestService
  let grpc: ReturnType<typeof rlsClients>
  let call: ReturnType<typeof caller>
  before(async () => {
    service = await startTestService(RULES, [], { clock: () => T0 })
    grpc = rlsClients(service.grpcPort)
    call = caller(service, grpc)
  })
  after(async () => {
    grpc.close()
    await service.stop()
  })

  it('gRPC hits_addend past the counter (1e15 + 1, 2e15, 2^63 - 1, 2^64 - 1): OVER_LIMIT, and the count is where it was', async () => {
    for (const hits of ['1000000000000001', '2000000000000000', '9223372036854775807', '18446744073709551615']) {
      const value = `edge-${hits}`
      const response = await grpc.shouldRateLimit({
        domain: 'cost',
        descriptors: [{ entries: [{ key: 'upstream', value }], hits_addend: { value: hits } }],
      })
      assert.equal(response.overall_code, 'OVER_LIMIT', `hits_addend ${hits}`)
      assert.equal(response.statuses[0].limit_remaining, 0)
      assert.equal((await call('grpc', 'upstream', value, 0n)).remaining, 10, 'nothing was counted')
    }
  })

  it('/json takes any uint64 hitsAddend (string or number), denies what cannot be charged; past uint64: 400', async () => {
    for (const hitsAddend of ['1000000000000001', 2e15, '9223372036854775807', '18446744073709551615', 2 ** 64]) {
      const response = await postJson(`${service.httpUrl}/json`, {
        domain: 'cost',
        descriptors: [{ entries: [{ key: 'upstream', value: `json-${hitsAddend}` }], hitsAddend }],
      })
      assert.equal(response.status, 429, `hitsAddend ${hitsAddend}: ${JSON.stringify(response.body)}`)
      assert.equal(response.body.overallCode, 'OVER_LIMIT')
    }
    for (const hitsAddend of ['18446744073709551616', '-1', '1.5', 2 ** 65]) {
      const response = await postJson(`${service.httpUrl}/json`, {
        domain: 'cost',
        descriptors: [{ entries: [{ key: 'upstream', value: 'x' }], hitsAddend }],
      })
      assert.equal(response.status, 400, `hitsAddend ${hitsAddend}`)
    }
  })

  it('/v1/check: hits above 1e9 are decided (denied, never); above uint64 the 400 says the bound', async () => {
    const url = `${service.httpUrl}/v1/check`
    const denied = await postJson(url, { domain: 'cost', descriptors: [[{ key: 'upstream', value: 'check-big' }]], hits: 2e9 })
    assert.equal(denied.status, 429)
    assert.equal(denied.body.never, true)
    const refused = await postJson(url, { domain: 'cost', descriptors: [[{ key: 'upstream', value: 'check-big' }]], hits: 1e20 })
    assert.equal(refused.status, 400)
    assert.match(refused.body.message, /^hits: at most 18446744073709551615/)
  })

  it('property: every path, every algorithm, any cost in [0, 2^64): admitted and charged, or denied', async () => {
    await assertAdmittedOnlyIfCharged(call, PATHS, RULE_KEYS, 150)
  })
})

describe('a rule whose limit no count can hold is refused at load', () => {
  it('names the file, line and field, and why', async () => {
    const rules =
      'domain: d\ndescriptors:\n  - key: k\n    limits:\n      - { algorithm: fixed-window, limit: 1000000000000000000, period: 1h }\n'
    let refusal: unknown
    try {
      // Stopped if it starts after all, so that a failing run still ends.
      await (await startTestService(rules)).stop()
    } catch (error) {
      refusal = error
    }
    assert.ok(refusal instanceof Error, 'a limit of 1e18 loaded')
    assert.match(refusal.message, /rules\.yaml:5:\d+/)
    assert.match(refusal.message, /limit: must be at most 9007199254740991/)
    assert.match(refusal.message, /admitted uncharged/)
  })
})

describe('a cost the store cannot charge is denied, never admitted (Redis)', () => {
  let redis: RedisProcess
  let service: TestService
  let grpc: ReturnType<typeof rlsClients>
  before(async () => {
    redis = await startRedis()
    service = await startTestService(RULES, ['--redis', redis.url, '--store-timeout', '5s'])
    grpc = rlsClients(service.grpcPort)
    await untilAnswered(service)
  })
  after(async () => {
    grpc?.close()
    await service?.stop()
    await redis?.stop()
  })

  it('property: the upstream counter on every path, any cost in [0, 2^64)', async () => {
    // Redis decides on its own clock: the upstream counter's window is an hour, and a sample whose
    // window restarted between its checks is skipped (see assertAdmittedOnlyIfCharged).
    await assertAdmittedOnlyIfCharged(caller(service, grpc), PATHS, ['upstream'], 60)
  })

  it("with --compat-keys envoy (upstream's counters, INCRBY): the same, any cost in [0, 2^64)", async () => {
    const compat = await startTestService(RULES, ['--redis', redis.url, '--compat-keys', 'envoy', '--store-timeout', '5s'])
    const client = rlsClients(compat.grpcPort)
    try {
      // Upstream's counters have a connection of their own, which refuses commands until it is up.
      await untilAnswered(compat)
      await assertAdmittedOnlyIfCharged(caller(compat, client), PATHS, ['upstream'], 40)
    } finally {
      client.close()
      await compat.stop()
    }
  })
})

describe('a cost the store cannot charge is denied, never admitted (memcached)', () => {
  let memcached: MemcachedProcess
  let service: TestService
  let grpc: ReturnType<typeof rlsClients>
  before(async () => {
    memcached = await startMemcached()
    service = await startTestService(RULES, ['--memcached', memcached.address, '--store-timeout', '5s'], { clock: () => T0 })
    grpc = rlsClients(service.grpcPort)
    await untilAnswered(service)
  })
  after(async () => {
    grpc?.close()
    await service?.stop()
    await memcached?.stop()
  })

  it('property: every path, every algorithm, any cost in [0, 2^64)', async () => {
    await assertAdmittedOnlyIfCharged(caller(service, grpc), PATHS, RULE_KEYS, 80)
  })
})
