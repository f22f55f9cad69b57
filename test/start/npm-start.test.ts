// `npm start` as the README runs it, stopped the way a process manager stops it: SIGTERM to npm.
// npm hands the signal to its child, the shell of the script; a shell that forks the server and
// dies of the signal would leave the server serving, an orphan (issue 28). The script `exec`s the
// server, so npm's child is the server itself, which drains and exits.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, readdirSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { freePort } from '../../packages/floodgate/test/support/ports.js'

/** The checkout (not the test runner's compiled copy of it). */
const ROOT = process.env.FLOODGATE_REPOSITORY ?? join(import.meta.dirname, '../..')

/** The processes below `pid`, from /proc (Linux): each pid with its command line. */
function descendants(pid: number): { pid: number; command: string }[] {
  const parents = new Map<number, number>()
  for (const name of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      // The field after the parenthesised name: state, then the parent's pid.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {
      // The process ended while we looked.
    }
  }
  const below: { pid: number; command: string }[] = []
  const walk = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid !== parent) continue
      let command = ''
      try {
        command = readFileSync(`/proc/${child}/cmdline`, 'utf8').replaceAll('\0', ' ')
      } catch {}
      below.push({ pid: child, command })
      walk(child)
    }
  }
  walk(pid)
  return below
}

/** Whether a process still runs (a zombie, ended but not yet reaped by its new parent, does not). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

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

/** Polls `condition` until it holds or `ms` pass (a bound for a broken build, not a pace). */
async function until(condition: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return condition()
}

describe('npm start', { timeout: 120_000 }, () => {
  it('stops serving when npm gets SIGTERM: the signal reaches the server, which drains and exits', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()]
    const args = ['start', '--', '--host', '127.0.0.1', '--http-port', `${httpPort}`, '--grpc-port', `${grpcPort}`]
    const npm = spawn('npm', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    npm.stdout.on('data', (chunk) => (output += chunk))
    npm.stderr.on('data', (chunk) => (output += chunk))
    let server: { pid: number; command: string } | undefined
    try {
      assert.ok(await until(() => output.includes('Floodgate listening'), 90_000), `npm start did not listen:\n${output}`)
      server = descendants(npm.pid!).find((process) => process.command.includes('cli.ts serve') && !/^(\/bin\/)?sh /.test(process.command))
      assert.ok(server, 'the server process is below npm')
      assert.equal(await accepts(httpPort), true)

      const exited = once(npm, 'exit')
      npm.kill('SIGTERM')
      await exited
      const stopped = await until(async () => !running(server!.pid) && !(await accepts(httpPort)), 30_000)
      assert.ok(stopped, `after SIGTERM to npm the server (pid ${server.pid}) still serves on ${httpPort}:\n${output}`)
      assert.match(output, /signal received/, 'the server saw the signal (it drained rather than being killed)')
    } finally {
      npm.kill('SIGKILL')
      // Only the server this test started, by its pid, if the fix failed and left it running.
      if (server !== undefined && running(server.pid)) process.kill(server.pid, 'SIGKILL')
    }
  })
})
