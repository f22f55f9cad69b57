// The gRPC flood options (grpc-listen-settings.ts): --no-grpc-await-settings and --grpc-close-batch, their
// defaults, flags, variables and errors.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readSettings } from '../../src/service/settings.js'
import { serveUsage } from '../../src/service/serve-help.js'

describe('gRPC flood settings', () => {
  it('default to awaiting the client SETTINGS and closing 64 connections per turn', () => {
    const settings = readSettings(['--config', 'rules.yaml'], {})
    assert.equal(settings.grpcAwaitSettings, true)
    assert.equal(settings.grpcCloseBatch, 64)
  })

  it('come from flags or environment variables, and are listed by --help', () => {
    const byFlag = readSettings(['--config', 'r.yaml', '--no-grpc-await-settings', '--grpc-close-batch', '8'], {})
    assert.equal(byFlag.grpcAwaitSettings, false)
    assert.equal(byFlag.grpcCloseBatch, 8)
    const byEnv = readSettings(['--config', 'r.yaml'], { FLOODGATE_NO_GRPC_AWAIT_SETTINGS: 'true', FLOODGATE_GRPC_CLOSE_BATCH: '500' })
    assert.equal(byEnv.grpcAwaitSettings, false)
    assert.equal(byEnv.grpcCloseBatch, 500)
    for (const flag of ['--no-grpc-await-settings', '--grpc-close-batch <count>']) assert.ok(serveUsage().includes(flag), flag)
  })

  it('refuse a batch of 0, which would close nothing, naming the flag and the variable', () => {
    assert.throws(
      () => readSettings(['--config', 'r.yaml', '--grpc-close-batch', '0'], {}),
      /--grpc-close-batch \/ FLOODGATE_GRPC_CLOSE_BATCH: expected a whole number ≥ 1/,
    )
  })
})
