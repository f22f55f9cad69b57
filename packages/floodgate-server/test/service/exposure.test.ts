// What the service shows of itself: the banner names the real bind address (and says when that is every
// interface); the public /readyz gives a status and a reason code, nothing of the host's files.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from '../../../floodgate/test/support/redis-server.js'
import { startTestService } from './helpers.js'

const BIN = fileURLToPath(new URL('../../bin/floodgate.js', import.meta.url))

describe('exposure', () => {
  it('bound to 0.0.0.0: the service reports the bind address and all interfaces, and is still called on loopback', async () => {
    const service = await startTestService(undefined, ['--host', '0.0.0.0'])
    try {
      assert.equal(service.httpBindUrl, `http://0.0.0.0:${service.httpPort}`)
      assert.equal(service.allInterfaces, true)
      assert.equal(service.grpcAddress, `0.0.0.0:${service.grpcPort}`)
      assert.equal((await fetch(`${service.httpUrl}/healthz`)).status, 200)
    } finally {
      await service.stop()
    }
    const local = await startTestService()
    try {
      assert.equal(local.httpBindUrl, `http://127.0.0.1:${local.httpPort}`)
      assert.equal(local.allInterfaces, false)
    } finally {
      await local.stop()
    }
  })

  it('the CLI banner prints http://0.0.0.0 and says all interfaces, not http://127.0.0.1', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-exposure-'))
    try {
      writeFileSync(
        join(dir, 'rules.yaml'),
        'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 1 }\n',
      )
      const [httpPort, grpcPort] = [await freePort(), await freePort()]
      const child = spawn(
        process.execPath,
        [
          BIN,
          'serve',
          '--config',
          join(dir, 'rules.yaml'),
          '--host',
          '0.0.0.0',
          '--http-port',
          String(httpPort),
          '--grpc-port',
          String(grpcPort),
          '--log-level',
          'silent',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      )
      const exited = new Promise((resolve) => child.on('exit', resolve))
      let banner = ''
      await new Promise<void>((resolve, reject) => {
        child.stderr!.on('data', (chunk) => {
          banner += chunk
          if (banner.includes('\n')) resolve()
        })
        child.once('exit', (code) => reject(new Error(`exited ${code} before the banner: ${banner}`)))
      })
      child.kill('SIGTERM')
      await exited
      assert.match(
        banner,
        new RegExp(`^Floodgate listening: HTTP http://0\\.0\\.0\\.0:${httpPort} .*gRPC 0\\.0\\.0\\.0:${grpcPort} .*all interfaces`),
      )
      assert.ok(!banner.includes('http://127.0.0.1'), banner)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
