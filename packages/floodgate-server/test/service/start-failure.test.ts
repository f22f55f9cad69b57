// A service that fails to start closes what it had opened, so its process ends instead of hanging.

import { it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { scriptArgs } from '../../../floodgate/test/support/script.js'

const WORKER = fileURLToPath(new URL('./start-failure-worker.ts', import.meta.url))

it('a gRPC TLS pair that does not load rejects the start, and the process ends by itself', async () => {
  const child = spawn(process.execPath, scriptArgs(WORKER), { stdio: ['ignore', 'pipe', 'inherit'] })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk
  })
  // Generous: the worker makes certificates with openssl. Past it, the process is taken as hung.
  const deadline = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])))
  clearTimeout(deadline)
  assert.match(output, /^rejected: /, output)
  assert.equal(signal, null, `the process was still alive after the start failed: ${output}`)
  assert.equal(code, 0)
})
