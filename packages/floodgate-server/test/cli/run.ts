// Runs the real `floodgate` command as a child process, for the CLI tests.

import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** The package's bin script, as npm links it. */
export const BIN = fileURLToPath(new URL('../../bin/floodgate.js', import.meta.url))

/** How a finished command ended and what it printed. */
export interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `floodgate <args>` to its end. */
export function run(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** `serve`'s arguments for the rules in `config` on loopback, on the given ports (0: any free one). */
export function onLoopback(config: string, httpPort: number, grpcPort: number): string[] {
  return ['--config', config, '--host', '127.0.0.1', '--http-port', String(httpPort), '--grpc-port', String(grpcPort)]
}
