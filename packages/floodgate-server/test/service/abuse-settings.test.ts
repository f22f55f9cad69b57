// The abuse-bound settings of `floodgate serve`: production defaults, flags and variables, errors naming the option.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { FloodgateError } from 'floodgate'
import { readSettings } from '../../src/service/settings.js'
import { serveUsage } from '../../src/service/serve-help.js'

describe('abuse-bound settings', () => {
  it('default to production values', () => {
    const settings = readSettings(['--config', 'rules.yaml'], {})
    assert.equal(settings.requestTimeoutMs, 10_000)
    assert.equal(settings.connectionTimeoutMs, 60_000)
    assert.equal(settings.keepAliveTimeoutMs, 72_000)
    assert.equal(settings.maxConnections, 10_000)
    assert.equal(settings.memoryMaxKeys, 100_000)
    assert.equal(settings.memoryMaxBytes, 64 * 1024 * 1024)
  })

  it('come from flags or environment variables, the flag winning', () => {
    const env = {
      FLOODGATE_REQUEST_TIMEOUT: '2s',
      FLOODGATE_CONNECTION_TIMEOUT: '30s',
      FLOODGATE_KEEP_ALIVE_TIMEOUT: '5000',
      FLOODGATE_MAX_CONNECTIONS: '500',
      FLOODGATE_MEMORY_MAX_KEYS: '1000',
      FLOODGATE_MEMORY_MAX_BYTES: '1048576',
    }
    const settings = readSettings(['--config', 'r.yaml', '--max-connections', '42'], env)
    assert.equal(settings.requestTimeoutMs, 2_000)
    assert.equal(settings.connectionTimeoutMs, 30_000)
    assert.equal(settings.keepAliveTimeoutMs, 5_000)
    assert.equal(settings.maxConnections, 42)
    assert.equal(settings.memoryMaxKeys, 1_000)
    assert.equal(settings.memoryMaxBytes, 1_048_576)
    for (const flag of [
      '--request-timeout',
      '--connection-timeout',
      '--keep-alive-timeout',
      '--max-connections',
      '--memory-max-keys',
      '--memory-max-bytes',
    ]) {
      assert.ok(serveUsage().includes(flag), flag)
    }
  })

  it('refuse bad values, naming the flag and the variable', () => {
    const cases: [string[], RegExp][] = [
      [['--request-timeout', '0'], /--request-timeout \/ FLOODGATE_REQUEST_TIMEOUT: must be greater than 0/],
      [['--keep-alive-timeout', 'soon'], /--keep-alive-timeout \/ FLOODGATE_KEEP_ALIVE_TIMEOUT: /],
      [['--max-connections', '0'], /--max-connections \/ FLOODGATE_MAX_CONNECTIONS: expected a whole number ≥ 1/],
      [['--memory-max-bytes', '1.5'], /--memory-max-bytes \/ FLOODGATE_MEMORY_MAX_BYTES: expected a whole number ≥ 1/],
    ]
    for (const [args, message] of cases) {
      assert.throws(
        () => readSettings(['--config', 'r.yaml', ...args], {}),
        (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
        args.join(' '),
      )
    }
  })
})
