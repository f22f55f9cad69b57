// What a new user meets first, through the real `floodgate` command: --version, --help on every
// subcommand, a taken port, HTTP or gRPC alone, readable logs, and the debug line of a denial.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { connect, createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../../floodgate/test/support/redis-server.js'
import { storeKeyOf } from 'floodgate/rules'
import { listenFailure, logFormat } from '../../src/commands/serve.js'
import { BIN, onLoopback, run } from './run.js'

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version

const RULES = `
domain: first
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 1 }
`

/** A running `floodgate serve`, its output so far, and a way to stop it. */
interface Served {
  child: ChildProcess
  stdout(): string
  /** Resolves with the stream's text once `pattern` appears in it. */
  waitFor(stream: 'stdout' | 'stderr', pattern: RegExp): Promise<string>
  stop(): Promise<number | null>
}

function serve(args: string[]): Served {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  const text = { stdout: '', stderr: '' }
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  child.stdout!.on('data', (chunk) => (text.stdout += chunk))
  child.stderr!.on('data', (chunk) => (text.stderr += chunk))
  return {
    child,
    stdout: () => text.stdout,
    waitFor: (stream, pattern) =>
      new Promise((resolve, reject) => {
        const look = () => {
          if (!pattern.test(text[stream])) return false
          child[stream]!.off('data', onData)
          resolve(text[stream])
          return true
        }
        const onData = () => void look()
        child[stream]!.on('data', onData)
        if (look()) return
        exited.then((code) =>
          reject(new Error(`floodgate exited (${code}) before ${pattern}; stdout: ${text.stdout} stderr: ${text.stderr}`)),
        )
      }),
    stop: () => {
      if (child.exitCode === null) child.kill('SIGTERM')
      return exited
    },
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

async function occupy(): Promise<{ port: number; server: Server }> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as { port: number }).port, server }
}

let dir: string
let rules: string
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-first-hour-'))
  rules = join(dir, 'rules.yaml')
  writeFileSync(rules, RULES)
})
after(() => rmSync(dir, { recursive: true, force: true }))

describe('floodgate --version and --help', () => {
  it('--version and -v print the version of floodgate-server and exit 0', async () => {
    for (const flag of ['--version', '-v']) {
      const result = await run([flag])
      assert.deepEqual([result.code, result.stdout, result.stderr], [0, `${VERSION}\n`, ''])
    }
  })

  it('--help and -h exit 0 with the usage on stdout, for every subcommand', async () => {
    const expected: [string[], RegExp][] = [
      [[], /^Usage:\n {2}floodgate serve/],
      [['serve'], /^Usage: floodgate serve --config/],
      [['validate'], /^Usage: floodgate validate <file\|dir>/],
      [['check'], /^Usage: floodgate check --url/],
    ]
    for (const [command, usage] of expected) {
      for (const flag of ['--help', '-h']) {
        const result = await run([...command, flag])
        assert.equal(result.code, 0, `${[...command, flag].join(' ')}: ${result.stderr}`)
        assert.match(result.stdout, usage)
      }
    }
  })
})

describe('floodgate serve: a taken port', () => {
  for (const server of ['HTTP', 'gRPC'] as const) {
    it(`${server}: one line naming the port and the flag, exit 1, no stack`, async () => {
      const taken = await occupy()
      try {
        const other = await freePort()
        const [httpPort, grpcPort] = server === 'HTTP' ? [taken.port, other] : [other, taken.port]
        const result = await run(['serve', ...onLoopback(rules, httpPort, grpcPort)])
        const flag = server === 'HTTP' ? '--http-port' : '--grpc-port'
        assert.equal(result.code, 1, result.stderr)
        assert.equal(
          result.stderr,
          `floodgate: port ${taken.port} is in use (${server}); choose another with ${flag}, or stop what holds it\n`,
        )
        assert.equal(result.stdout, '')
      } finally {
        taken.server.close()
      }
    })
  }

  it('names privileged ports and foreign addresses too', () => {
    const settings = { host: '192.0.2.1', httpPort: 80, grpcPort: 81 }
    assert.equal(
      listenFailure(Object.assign(new Error('listen EACCES'), { code: 'EACCES', port: 80 }), settings),
      'port 80 needs privileges this process lacks (HTTP); choose one above 1023 with --http-port',
    )
    assert.equal(
      listenFailure(
        Object.assign(new Error('listen EADDRNOTAVAIL: address not available 192.0.2.1:81'), {
          code: 'EADDRNOTAVAIL',
          port: 81,
          server: 'gRPC',
        }),
        settings,
      ),
      "address 192.0.2.1 is not one of this machine's (gRPC); choose another with --host",
    )
    assert.equal(listenFailure(new Error('something else'), settings), undefined)
  })
})

describe('floodgate serve: HTTP only or gRPC only', () => {
  it('--no-grpc serves HTTP and leaves the gRPC port alone', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()]
    const served = serve([...onLoopback(rules, httpPort, grpcPort), '--no-grpc'])
    try {
      const banner = await served.waitFor('stderr', /Floodgate listening: .*\n/)
      assert.match(banner, new RegExp(`Floodgate listening: HTTP http://127\\.0\\.0\\.1:${httpPort} .*, gRPC off, store memory`))
      const answer = await fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ domain: 'first', descriptors: [[{ key: 'user', value: 'http-only' }]] }),
      })
      assert.equal(answer.status, 200)
      assert.equal(await accepts(grpcPort), false)
    } finally {
      assert.equal(await served.stop(), 0)
    }
  })

  it('--no-http serves gRPC and leaves the HTTP port alone (FLOODGATE_NO_HTTP works the same)', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()]
    const served = serve([...onLoopback(rules, httpPort, grpcPort), '--no-http'])
    try {
      const banner = await served.waitFor('stderr', /Floodgate listening: .*\n/)
      assert.match(banner, new RegExp(`Floodgate listening: HTTP off, gRPC 127\\.0\\.0\\.1:${grpcPort} \\(Envoy RLS v3\\), store memory`))
      assert.equal(await accepts(grpcPort), true)
      assert.equal(await accepts(httpPort), false)
    } finally {
      assert.equal(await served.stop(), 0)
    }
  })

  it('refuses both at once', async () => {
    const result = await run(['serve', '--config', rules, '--no-http', '--no-grpc'])
    assert.equal(result.code, 2)
    assert.match(result.stderr, /^floodgate: --no-grpc \/ FLOODGATE_NO_GRPC: with --no-http too nothing would be served/)
  })
})

describe('floodgate serve: logs', () => {
  it('pretty on a terminal, JSON otherwise, unless --log-format says', () => {
    assert.equal(logFormat({ logFormat: undefined }, true), 'pretty')
    assert.equal(logFormat({ logFormat: undefined }, false), 'json')
    assert.equal(logFormat({ logFormat: 'json' }, true), 'json')
    assert.equal(logFormat({ logFormat: 'pretty' }, false), 'pretty')
  })

  it('--log-format pretty writes readable lines, and the default into a pipe is JSON', async () => {
    for (const format of ['pretty', undefined]) {
      const served = serve([...onLoopback(rules, 0, 0), ...(format ? ['--log-format', format] : [])])
      try {
        const stdout = await served.waitFor('stdout', /floodgate listening/)
        const line = stdout.split('\n').find((l) => l.includes('floodgate listening'))!
        if (format === 'pretty') {
          assert.match(line, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: floodgate listening$/)
        } else {
          assert.equal(JSON.parse(line).msg, 'floodgate listening')
        }
      } finally {
        await served.stop()
      }
    }
  })

  it('at debug level, each denial is one line with the rule and a hash of the key, never the key', async () => {
    const httpPort = await freePort()
    const served = serve([...onLoopback(rules, httpPort, 0), '--no-grpc', '--log-level', 'debug', '--log-format', 'json'])
    try {
      await served.waitFor('stderr', /Floodgate listening/)
      const check = () =>
        fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ domain: 'first', descriptors: [[{ key: 'user', value: 'secret-alice' }]] }),
        }).then((response) => response.json() as Promise<{ allowed: boolean }>)
      assert.equal((await check()).allowed, true)
      assert.equal((await check()).allowed, false)
      await served.waitFor('stdout', /"msg":"rate limited"/)
      const denials = served
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"msg":"rate limited"'))
        .map((line) => JSON.parse(line))
      assert.equal(denials.length, 1)
      assert.equal(denials[0].level, 20)
      assert.equal(denials[0].domain, 'first')
      assert.equal(denials[0].rule, 'first.user')
      // As docs/service.md tells to compute it by hand: the first 16 hex digits of the store key's SHA-256.
      const storeKey = storeKeyOf('first', [{ key: 'user', value: 'secret-alice' }])
      assert.equal(storeKey, 'first|user=secret-alice')
      assert.equal(denials[0].key, `sha256:${createHash('sha256').update(storeKey).digest('hex').slice(0, 16)}`)
      assert.doesNotMatch(served.stdout(), /secret-alice/)
    } finally {
      await served.stop()
    }
  })
})
