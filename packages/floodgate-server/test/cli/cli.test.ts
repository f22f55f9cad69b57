// The real `floodgate` command as a child process: validate, check, serve with graceful SIGTERM drain.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../../floodgate/test/support/redis-server.js'
import { BIN, onLoopback, run } from './run.js'

const GOOD_RULES = `
domain: cli
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
`

const BAD_RULES = `domain: cli
descriptors:
  - key: user
    rate_limit:
      unit: fortnight
      requests_per_unit: 2
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
`

/** Resolves when `text` has appeared in the stream (accumulated). */
function waitForOutput(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(() => reject(new Error(`no ${pattern} on ${stream} within ${timeoutMs}ms; got: ${seen}`)), timeoutMs)
    const onExit = (code: number | null) => {
      clearTimeout(timer)
      reject(new Error(`the process exited (${code}) before ${pattern} appeared on ${stream}; got: ${seen}`))
    }
    const onData = (chunk: Buffer) => {
      seen += chunk
      if (pattern.test(seen)) {
        clearTimeout(timer)
        child[stream]!.off('data', onData)
        child.off('exit', onExit)
        resolve(seen)
      }
    }
    child[stream]!.on('data', onData)
    child.once('exit', onExit)
  })
}

describe('floodgate validate', () => {
  let dir: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-cli-'))
    writeFileSync(join(dir, 'good.yaml'), GOOD_RULES)
    writeFileSync(join(dir, 'bad.yaml'), BAD_RULES)
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('prints a summary and exits 0 for valid rules', async () => {
    const result = await run(['validate', join(dir, 'good.yaml')])
    assert.equal(result.code, 0, result.stderr)
    assert.match(result.stdout, /^OK: 1 file, 1 domain \(cli\), 1 rule\n$/)
  })

  it('prints every error as file:line path — message and exits 1', async () => {
    const file = join(dir, 'bad.yaml')
    const result = await run(['validate', file])
    assert.equal(result.code, 1)
    const lines = result.stderr.trim().split('\n')
    assert.ok(
      lines.some((l) => l.startsWith(`${file}:5`) && /descriptors\[0\]\.rate_limit\.unit: unknown unit "fortnight"/.test(l)),
      result.stderr,
    )
    assert.ok(
      lines.some((l) => /duplicate/i.test(l)),
      result.stderr,
    )
    assert.match(lines.at(-1)!, /^2 errors in the rules$/)
  })

  it('exits 1 for a missing file and 2 for usage errors', async () => {
    assert.equal((await run(['validate', join(dir, 'missing.yaml')])).code, 1)
    assert.equal((await run(['validate'])).code, 2)
    assert.equal((await run(['frobnicate'])).code, 2)
    const serve = await run(['serve', '--http-port', 'abc', '--config', join(dir, 'good.yaml')])
    assert.equal(serve.code, 2)
    assert.match(serve.stderr, /--http-port \/ FLOODGATE_HTTP_PORT: expected a port number/)
  })
})

describe('floodgate serve and check', () => {
  let dir: string
  let child: ChildProcess
  let httpPort: number
  let exited: Promise<number | null>
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-cli-'))
    writeFileSync(join(dir, 'rules.yaml'), GOOD_RULES)
    httpPort = await freePort()
    const grpcPort = await freePort()
    child = spawn(process.execPath, [BIN, 'serve', ...onLoopback(join(dir, 'rules.yaml'), httpPort, grpcPort)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FLOODGATE_LOG_LEVEL: 'info' },
    })
    exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
    const line = await waitForOutput(child, 'stderr', /Floodgate listening: .*\n/)
    assert.match(line, new RegExp(`HTTP http://127\\.0\\.0\\.1:${httpPort}.*gRPC 127\\.0\\.0\\.1:${grpcPort}`))
  })
  after(async () => {
    if (child.exitCode === null) child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  it('check exits 0 while allowed, 1 once limited, 2 when the service is unreachable', async () => {
    const url = `http://127.0.0.1:${httpPort}`
    const first = await run(['check', '--url', url, '--domain', 'cli', 'user=checker'])
    assert.equal(first.code, 0, first.stderr)
    assert.match(first.stdout, /^allowed\n {2}rule cli\.user, policy .*: allowed, 1\/2 remaining/)
    assert.equal((await run(['check', '--url', url, '--domain', 'cli', 'user=checker'])).code, 0)
    const limited = await run(['check', '--url', url, '--domain', 'cli', 'user=checker', '--json'])
    assert.equal(limited.code, 1)
    assert.equal(JSON.parse(limited.stdout).allowed, false)
    const dead = await run(['check', '--url', `http://127.0.0.1:${await freePort()}`, '--domain', 'cli', 'user=x'])
    assert.equal(dead.code, 2)
    assert.match(dead.stdout, /^error: /)
  })

  it('on SIGTERM finishes the in-flight request, then exits 0', async () => {
    const body = JSON.stringify({ domain: 'cli', descriptors: [[{ key: 'user', value: 'inflight' }]] })
    const half = Math.floor(body.length / 2)
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: httpPort,
          method: 'POST',
          path: '/v1/check',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = ''
          res.on('data', (chunk) => (text += chunk))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
        },
      )
      req.on('error', reject)
      req.write(body.slice(0, half))
      // The request is now in flight (headers and half the body sent): stop the service, then finish it.
      setTimeout(() => {
        const draining = waitForOutput(child, 'stdout', /shutting down/)
        child.kill('SIGTERM')
        draining.then(() => req.end(body.slice(half)), reject)
      }, 200)
    })
    const answer = await response
    assert.equal(answer.status, 200)
    assert.equal(JSON.parse(answer.body).allowed, true)
    assert.equal(await exited, 0)
  })
})
