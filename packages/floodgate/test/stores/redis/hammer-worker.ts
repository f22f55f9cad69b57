// Child process for concurrency.test.ts: its own Cluster client and RedisStore hammer the same few
// keys as its sibling processes, and it reports how many requests each key admitted.
//
// Protocol: argv[2] is a JSON WorkerConfig. The worker connects, prints `ready` on stdout, waits
// for a line `go` on stdin (so every process starts together), runs, prints one JSON line
// `{"admitted": {"<case>": {"<key>": n}}}` and exits.

import { createInterface } from 'node:readline'
import { Cluster } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'

/** One policy set hammered on its own keys. */
export interface HammerCase {
  name: string
  policies: PolicyOptions[]
  keys: string[]
}

export interface WorkerConfig {
  startupNodes: { host: string; port: number }[]
  /** Every request is decided at this instant, so no window boundary or refill interferes. */
  now: number
  cases: HammerCase[]
  /** Requests this worker makes in total, spread round-robin over every (case, key). */
  requests: number
  /** Requests in flight at once. */
  inflight: number
}

export interface WorkerReport {
  admitted: Record<string, Record<string, number>>
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig
  const cases = config.cases.map((c) => ({ ...c, compiled: createPolicies(c.policies) }))
  const targets = cases.flatMap((c) => c.keys.map((key) => ({ c, key })))
  const admitted: WorkerReport['admitted'] = {}
  for (const c of cases) admitted[c.name] = Object.fromEntries(c.keys.map((key) => [key, 0]))

  const client = new Cluster(config.startupNodes, { scaleReads: 'master' })
  const store = new RedisStore({ client })
  await client.ping()
  process.stdout.write('ready\n')
  await lineFromStdin('go')

  let next = 0
  async function lane(): Promise<void> {
    while (next < config.requests) {
      const { c, key } = targets[next++ % targets.length]
      const [response] = await store.evaluate([{ key, policies: c.compiled, cost: 1, now: config.now }])
      if (response.allowed) admitted[c.name][key]++
    }
  }
  await Promise.all(Array.from({ length: config.inflight }, lane))
  await store.close()
  await client.quit()
  process.stdout.write(`${JSON.stringify({ admitted } satisfies WorkerReport)}\n`)
}

function lineFromStdin(expected: string): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin })
    lines.on('line', (line) => {
      if (line.trim() === expected) {
        lines.close()
        // Nothing more comes on stdin; an open stdin would keep this process alive.
        process.stdin.destroy()
        resolve()
      }
    })
  })
}

main().catch((error: unknown) => {
  process.stderr.write(`hammer-worker failed: ${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
