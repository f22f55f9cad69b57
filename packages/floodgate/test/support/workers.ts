// Runs a test's worker script in several processes at once: the concurrency tests that count what
// got through when processes hammer one key (Redis, memcached, lease and write-back).

import { spawn, type ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'
import { scriptArgs } from './script.js'

/**
 * Worker processes of one test file. A worker prints `ready` once connected, starts when it reads
 * `go` on stdin, and prints its report as one JSON line before exiting 0. All start together, so
 * their requests overlap as much as the machine allows.
 */
export class Workers {
  readonly #script: string
  readonly #children: ChildProcess[] = []

  /** `script`: the worker's TypeScript file, run with the repository's source condition (scriptArgs). */
  constructor(script: string) {
    this.#script = script
  }

  /** Starts `count` workers with `config`, starts them together once all are connected, and collects their reports. */
  async run<Config, Report>(count: number, config: Config): Promise<Report[]> {
    const workers = Array.from({ length: count }, () => this.#start<Report>(config))
    await Promise.all(workers.map((worker) => worker.ready))
    for (const worker of workers) worker.child.stdin!.write('go\n')
    return Promise.all(workers.map((worker) => worker.report))
  }

  /** Kills the workers still running (a failed test must not leave them behind). */
  killAll(): void {
    for (const child of this.#children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }

  #start<Report>(config: unknown): { child: ChildProcess; ready: Promise<void>; report: Promise<Report> } {
    const child = spawn(process.execPath, [...scriptArgs(this.#script), JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    this.#children.push(child)
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const lines = createInterface({ input: child.stdout! })
    let markReady!: () => void
    const ready = new Promise<void>((resolve) => (markReady = resolve))
    const report = new Promise<Report>((resolve, reject) => {
      let result: Report | undefined
      lines.on('line', (line) => {
        if (line === 'ready') markReady()
        else if (line.startsWith('{')) result = JSON.parse(line) as Report
      })
      child.once('exit', (code) => {
        if (code === 0 && result !== undefined) resolve(result)
        else reject(new Error(`worker ${this.#script} exited with ${code}: ${stderr}`))
      })
    })
    // A worker that dies before `ready` must fail the test instead of hanging it.
    return { child, ready: Promise.race([ready, report.then(() => undefined)]), report }
  }
}
