// `floodgate serve --help` read as a user reads it, a mistyped flag answered with what was meant,
// and the help and version paths kept free of the service's modules (their speed depends on it).

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { HELP_GROUPS, HELP_WIDTH, serveUsage, suggest, unknownFlag } from '../../src/service/serve-help.js'
import { type OptionName, SERVE_OPTIONS } from '../../src/service/serve-options.js'
import { readSettings } from '../../src/service/settings.js'
import { run } from './run.js'

// String options that have no default: absent means "not used" (no Redis, no peers, no admin API).
const NO_DEFAULT = new Set<OptionName>([
  'config',
  'redisUrl',
  'redisCluster',
  'redisSentinels',
  'sentinelName',
  'redisAuth',
  'redisSentinelAuth',
  'memcached',
  'memcacheSrv',
  'compatKeys',
  'redisPerSecond',
  'redisTlsCa',
  'memcacheTlsCa',
  'memcacheTlsCert',
  'memcacheTlsKey',
  'redisTlsCert',
  'redisTlsKey',
  'adminToken',
  'region',
  'peer',
  'regionsFile',
  'grpcTlsCert',
  'grpcTlsKey',
  'grpcClientCa',
  'grpcClientSan',
  'grpcSocket',
])

describe('floodgate serve --help', () => {
  it('puts every option in exactly one group', () => {
    const placed = HELP_GROUPS.flatMap((group) => group.options)
    assert.deepEqual([...placed].sort(), Object.keys(SERVE_OPTIONS).sort())
    assert.equal(new Set(placed).size, placed.length, 'an option is in two groups')
  })

  it(`keeps every line within ${HELP_WIDTH} columns`, () => {
    const wide = serveUsage()
      .split('\n')
      .filter((line) => line.length > HELP_WIDTH)
    assert.deepEqual(wide, [])
  })

  it('shows a typed placeholder for every option that takes a value, never <value>', () => {
    const usage = serveUsage()
    assert.doesNotMatch(usage, /<value>/)
    assert.match(usage, /--store-timeout <duration>/)
    assert.match(usage, /--redis-cluster <host:port,…>/)
  })

  it('shows the default of every option that has one, and the variable of each', () => {
    const usage = serveUsage()
    for (const [name, spec] of Object.entries(SERVE_OPTIONS) as [OptionName, (typeof SERVE_OPTIONS)[OptionName]][]) {
      assert.ok(usage.includes(`env ${spec.env}`), spec.env)
      if (spec.type === 'string' && !NO_DEFAULT.has(name)) assert.match(spec.help, /default/, `--${spec.flag} shows no default`)
    }
  })

  it('titles the groups a user looks for', () => {
    const titles = serveUsage()
      .split('\n')
      .filter((line) => /^\S.*:$/.test(line))
    for (const concern of ['Listening', 'Store', 'Rules', 'Envoy compatibility', 'Regions', 'Limits and timeouts', 'Observability'])
      assert.ok(
        titles.some((title) => title.startsWith(concern)),
        concern,
      )
  })
})

describe('a mistyped flag', () => {
  it('names the flag it was probably meant to be', () => {
    assert.deepEqual(unknownFlag(['--confg', 'rules.yaml']), { flag: '--confg', suggestion: 'config' })
    assert.deepEqual(unknownFlag(['--config', 'x', '--redis-clustr=a:1']), { flag: '--redis-clustr', suggestion: 'redis-cluster' })
    assert.deepEqual(unknownFlag(['--store-timeot', '5s']), { flag: '--store-timeot', suggestion: 'store-timeout' })
  })

  it('suggests nothing for a word unlike any flag, and reads nothing after --', () => {
    assert.deepEqual(unknownFlag(['--frobnicate']), { flag: '--frobnicate', suggestion: undefined })
    assert.equal(unknownFlag(['--config', 'x', '--', '--confg']), undefined)
    assert.equal(unknownFlag(['--config=x', '--no-watch']), undefined)
    assert.equal(suggest('zzzzzz', ['serve', 'check']), undefined)
  })

  it('is refused by readSettings with the suggestion, whoever calls it', () => {
    assert.throws(() => readSettings(['--confg', 'rules.yaml'], {}), /unknown option --confg; did you mean --config\?/)
  })

  it('gets exit 2 and one line from the real command, for a flag and for a command', async () => {
    const flag = await run(['serve', '--confg', 'rules.yaml'])
    assert.equal(flag.code, 2)
    assert.equal(flag.stderr, 'floodgate: unknown option --confg; did you mean --config? (floodgate serve --help lists them)\n')
    const command = await run(['serv', '--config', 'rules.yaml'])
    assert.equal(command.code, 2)
    assert.match(command.stderr, /^floodgate: unknown command "serv"; did you mean serve\?\n/)
  })
})

// --version and --help answer within about twice `node -e 0` only while the modules they load are
// these few files. That is measured (bench note in the commit); here the import graph is held.
describe('the help and version paths', () => {
  const STATIC_IMPORT = /^import\s+(?!type\b)[^'"]*from\s+['"]([^'"]+)['"]/gm
  const allowed = new Set([
    'node:fs',
    'fastest-levenshtein',
    './service/serve-help.js',
    './serve-options.js',
    './telemetry-options.js',
    './memcache-options.js',
    './compat-options.js',
    './redis-auth-options.js',
  ])

  for (const file of [
    '../../src/cli.ts',
    '../../src/service/serve-help.ts',
    '../../src/service/serve-options.ts',
    '../../src/service/telemetry-options.ts',
    '../../src/service/memcache-options.ts',
    '../../src/service/compat-options.ts',
    '../../src/service/redis-auth-options.ts',
  ]) {
    it(`${file.replace('../../', '')} imports no module of the service`, () => {
      // The test build runs the command from cli.js, as installed (scripts/compile-tests.mjs).
      const url = new URL(file, import.meta.url)
      const source = readFileSync(existsSync(url) ? url : new URL(file.replace(/\.ts$/, '.js'), import.meta.url), 'utf8')
      const imported = [...source.matchAll(STATIC_IMPORT)].map((match) => match[1])
      assert.deepEqual(
        imported.filter((name) => !allowed.has(name)),
        [],
      )
    })
  }
})
