// The statsd and DogStatsD export against real listeners: upstream's names, values and tags for the
// same requests as upstream's own tests of its stats (test/redis/fixed_cache_impl_test.go's
// TestNearLimit, src/godogstats' tests of EXTRA_TAGS and mogrifiers), sent over gRPC.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { freePort } from '../../../floodgate/test/support/ports.js'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { mogrify, readMogrifiers } from '../../src/service/statsd-mogrifiers.js'
import { rlsClients } from './helpers.js'
import { countersOf, tcpStatsdListener, udpStatsdListener, type StatsdListener } from './statsd-listeners.js'

const RULES = `
domain: domain
descriptors:
  - key: key4
    value: value4
    rate_limit: { unit: hour, requests_per_unit: 15 }
  - key: trial
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
`

// Bounds a wait for datagrams that never come (the export broken), so the test fails instead of hanging.
const WAIT = { timeout: 60_000 }

// A frozen clock: the hour's window never turns during a test.
const NOW = Date.UTC(2026, 0, 1, 12, 30)

let dir: string
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-statsd-'))
  writeFileSync(join(dir, 'rules.yaml'), RULES)
})
after(() => rmSync(dir, { recursive: true, force: true }))

/** Starts the service on the embedded store, configured by upstream's variables in `env`. */
function start(env: Record<string, string>, args: string[] = []): Promise<RunningService> {
  const settings = readSettings(
    ['--config', join(dir, 'rules.yaml'), '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--no-http', ...args],
    env,
  )
  return startService(settings, { logger: pino({ level: 'silent' }), clock: () => NOW })
}

/**
 * Upstream's TestNearLimit on a limit of 15 an hour (near-limit threshold floor(15 × 0.8) = 12),
 * from an empty counter: 11 hits (count 11: all within), 2 hits (count 13: within, 1 past 12 is
 * near), 3 hits (count 16: 1 over; the 2 from 13 to the limit are near, none within). Then a
 * shadow-mode limit of 1: the first hit within (and near: past floor(0.8) = 0), the second over and
 * shadow. Then a request with no domain: a service error, as upstream's serviceError; and one in a
 * domain no rules name.
 */
async function sendRequests(service: RunningService): Promise<void> {
  const grpc = rlsClients(service.grpcPort)
  try {
    const key4 = [{ entries: [{ key: 'key4', value: 'value4' }] }]
    for (const hits of [11, 2]) {
      assert.equal((await grpc.shouldRateLimit({ domain: 'domain', descriptors: key4, hits_addend: hits })).overall_code, 'OK')
    }
    assert.equal((await grpc.shouldRateLimit({ domain: 'domain', descriptors: key4, hits_addend: 3 })).overall_code, 'OVER_LIMIT')
    const trial = [{ entries: [{ key: 'trial', value: 'x' }] }]
    for (let i = 0; i < 2; i++) assert.equal((await grpc.shouldRateLimit({ domain: 'domain', descriptors: trial })).overall_code, 'OK')
    await assert.rejects(grpc.shouldRateLimit({ domain: '', descriptors: trial }), /domain/)
    // A domain no rules name: OK, and one domain_not_found per descriptor looked up, as upstream's GetLimit counts.
    const unknown = { domain: 'nowhere', descriptors: [...trial, ...key4] }
    assert.equal((await grpc.shouldRateLimit(unknown)).overall_code, 'OK')
  } finally {
    grpc.close()
  }
}

/** The counters upstream emits for sendRequests, by name (before tags). */
const EXPECTED: readonly [string, number][] = [
  ['ratelimit.service.rate_limit.domain.key4_value4.total_hits', 16],
  ['ratelimit.service.rate_limit.domain.key4_value4.within_limit', 13],
  ['ratelimit.service.rate_limit.domain.key4_value4.near_limit', 3],
  ['ratelimit.service.rate_limit.domain.key4_value4.over_limit', 1],
  ['ratelimit.service.rate_limit.domain.trial.total_hits', 2],
  ['ratelimit.service.rate_limit.domain.trial.within_limit', 1],
  ['ratelimit.service.rate_limit.domain.trial.near_limit', 1],
  ['ratelimit.service.rate_limit.domain.trial.over_limit', 1],
  ['ratelimit.service.rate_limit.domain.trial.shadow_mode', 1],
  ['ratelimit.service.rate_limit.nowhere.domain_not_found', 2],
  ['ratelimit.service.call.should_rate_limit.service_error', 1],
  ['ratelimit.service.config_load_success', 1],
  // Every call the server decoded, the failed one too (upstream's gRPC interceptor counts them).
  ['ratelimit_server.ShouldRateLimit.total_requests', 7],
]

describe('statsd export (USE_STATSD)', () => {
  let listener: Awaited<ReturnType<typeof tcpStatsdListener>>
  before(async () => {
    listener = await tcpStatsdListener()
  })
  after(() => listener.close())

  it("sends upstream's names and values over TCP, EXTRA_TAGS serialized into the name as gostats does", WAIT, async () => {
    const service = await start({
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(listener.port),
      // gostats sorts tags by key and makes the '.' of a value '_'.
      EXTRA_TAGS: 'cluster:eu.west,app:edge',
    })
    await sendRequests(service)
    // Counters go out every STATS_FLUSH_INTERVAL (10s) and at shutdown: this test waits for shutdown's.
    await service.close()
    const tags = '.__app=edge.__cluster=eu_west'
    const expected = new Map(EXPECTED.map(([name, value]) => [`${name}${tags}`, value]))
    // The client closes its connection once it has sent everything: then every line is in.
    await listener.until(() => listener.closedConnections() > 0)
    assert.deepEqual(countersOf(listener.lines), expected)
    const timings = listener.lines.filter((line) => line.startsWith(`ratelimit_server.ShouldRateLimit.response_time${tags}:`))
    assert.equal(timings.length, 7, 'one response_time per call')
    for (const line of timings) assert.match(line, /:\d+\|ms$/)
  })
})

describe('DogStatsD export (USE_DOG_STATSD)', () => {
  let listener: StatsdListener
  before(async () => {
    listener = await udpStatsdListener()
  })
  after(() => listener.close())

  it('sends over UDP with EXTRA_TAGS as tags, and mogrifiers turning parts of names into tags', WAIT, async () => {
    const service = await start({
      USE_STATSD: 'false',
      USE_DOG_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(listener.port),
      EXTRA_TAGS: 'app:edge',
      // The mogrifier of upstream's own tests (src/godogstats/mogrifier_map_test.go).
      USE_DOG_STATSD_MOGRIFIERS: 'TAG',
      DOG_STATSD_MOGRIFIER_TAG_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$`,
      DOG_STATSD_MOGRIFIER_TAG_NAME: 'ratelimit.service.rate_limit.$3',
      DOG_STATSD_MOGRIFIER_TAG_TAGS: 'domain:$1,descriptor:$2',
    })
    await sendRequests(service)
    await service.close()
    const expected = new Map<string, number>()
    for (const [name, value] of EXPECTED) {
      const parts = /^ratelimit\.service\.rate_limit\.([^.]+)\.([^.]+)\.(\w+)$/.exec(name)
      const key =
        parts === null
          ? `${name}|#app:edge`
          : `ratelimit.service.rate_limit.${parts[3]}|#app:edge,descriptor:${parts[2]},domain:${parts[1]}`
      expected.set(key, value)
    }
    await listener.until((lines) => countersOf(lines).size >= expected.size)
    assert.deepEqual(countersOf(listener.lines), expected)
  })
})

describe('statsd: should_rate_limit.redis_error', () => {
  let listener: StatsdListener
  before(async () => {
    listener = await udpStatsdListener()
  })
  after(() => listener.close())

  it('counts a call the store could not answer (Envoy then decides by failure_mode_deny)', WAIT, async () => {
    // Nothing listens there: every store call fails.
    const redis = `redis://127.0.0.1:${await freePort()}`
    const service = await start({}, ['--redis', redis, '--statsd', `127.0.0.1:${listener.port}`, '--statsd-protocol', 'udp'])
    const grpc = rlsClients(service.grpcPort)
    try {
      await assert.rejects(grpc.shouldRateLimit({ domain: 'domain', descriptors: [{ entries: [{ key: 'key4', value: 'value4' }] }] }), {
        code: 14,
      })
    } finally {
      grpc.close()
      await service.close()
    }
    const name = 'ratelimit.service.call.should_rate_limit.redis_error'
    await listener.until((lines) => countersOf(lines).has(name))
    assert.equal(countersOf(listener.lines).get(name), 1)
  })
})

describe('DogStatsD mogrifiers, as upstream reads them', () => {
  const env = (tags: string) => ({
    DOG_STATSD_MOGRIFIER_TAG_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$`,
    DOG_STATSD_MOGRIFIER_TAG_NAME: 'ratelimit.service.rate_limit.$3',
    DOG_STATSD_MOGRIFIER_TAG_TAGS: tags,
  })
  const name = 'ratelimit.service.rate_limit.mongo_cps.database_users.total_hits'

  it('fills groups into the name and tags; a group past the last stays as written', () => {
    assert.deepEqual(mogrify(readMogrifiers(['TAG'], env('domain:$1,descriptor:$2')), name), {
      name: 'ratelimit.service.rate_limit.total_hits',
      tags: ['domain:mongo_cps', 'descriptor:database_users'],
    })
    assert.deepEqual(mogrify(readMogrifiers(['TAG'], env('domain:$1,descriptor:$5')), name).tags, ['domain:mongo_cps', 'descriptor:$5'])
  })

  it('applies the first that matches, in the order listed', () => {
    const both = {
      DOG_STATSD_MOGRIFIER_SPECIFIC_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.foo$`,
      DOG_STATSD_MOGRIFIER_SPECIFIC_NAME: 'custom.foo',
      DOG_STATSD_MOGRIFIER_SPECIFIC_TAGS: 'domain:$1,descriptor:$2',
      DOG_STATSD_MOGRIFIER_WILDCARD_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$`,
      DOG_STATSD_MOGRIFIER_WILDCARD_NAME: 'ratelimit.service.rate_limit.$3',
      DOG_STATSD_MOGRIFIER_WILDCARD_TAGS: 'domain:$1,descriptor:$2',
    }
    const mogrifiers = readMogrifiers(['SPECIFIC', 'WILDCARD'], both)
    assert.equal(mogrify(mogrifiers, 'ratelimit.service.rate_limit.d.k.foo').name, 'custom.foo')
    assert.equal(mogrify(mogrifiers, 'ratelimit.service.rate_limit.d.k.bar').name, 'ratelimit.service.rate_limit.bar')
    assert.deepEqual(mogrify(mogrifiers, 'other.metric.name'), { name: 'other.metric.name', tags: [] })
  })

  it('refuses what upstream refuses at start, naming the variable', () => {
    assert.throws(() => readMogrifiers(['TAG'], { ...env('domain:$1'), DOG_STATSD_MOGRIFIER_TAG_PATTERN: '' }), /TAG_PATTERN/)
    assert.throws(() => readMogrifiers(['TAG'], { ...env('domain:$1'), DOG_STATSD_MOGRIFIER_TAG_NAME: '' }), /TAG_NAME/)
    assert.throws(() => readMogrifiers(['TAG'], env(':5')), /no key/)
    assert.throws(() => readMogrifiers(['TAG'], env('domain:$1,descriptor:')), /descriptor has no value/)
    assert.throws(() => readMogrifiers(['TAG'], { ...env('domain:$1'), DOG_STATSD_MOGRIFIER_TAG_PATTERN: '(' }), /does not compile/)
  })

  it('USE_STATSD and USE_DOG_STATSD together are refused, as upstream refuses two sinks', () => {
    assert.throws(() => readSettings(['--config', 'r.yaml'], { USE_STATSD: 'true', USE_DOG_STATSD: 'true' }), /one stats sink/)
  })
})
