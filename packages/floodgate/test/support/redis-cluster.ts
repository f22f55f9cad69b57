// Starts a throwaway Redis Cluster (masters + replicas on free loopback ports) for a test, can
// SIGKILL a master to force a failover, and stops everything afterwards.

import { execFile } from 'node:child_process'
import { createServer } from 'node:net'
import { freePort, startRedis, withClient, type RedisProcess } from './redis-server.js'

export interface ClusterOptions {
  /** Masters that share the 16384 slots (default 3; Redis needs at least 3). */
  masters?: number
  /** Replicas of each master (default 1), promoted when their master dies. */
  replicasPerMaster?: number
  /** `cluster-node-timeout`: how long a silent master takes to be failed over (default 1000ms). */
  nodeTimeoutMs?: number
  /** Longest wait for the cluster to form or heal before giving up with an error (default 20s). */
  readyTimeoutMs?: number
  /**
   * `cluster-require-full-coverage` (default true, Redis's default): with it, every node refuses
   * every command (CLUSTERDOWN) while a failed master's slots wait for a replica.
   */
  requireFullCoverage?: boolean
  /** `requirepass` and `masterauth` on every node: a Cluster that refuses clients without AUTH. */
  password?: string
}

export interface ClusterNode {
  readonly host: string
  readonly port: number
  readonly process: RedisProcess
}

export interface KilledMaster {
  /** Port of the master that was killed. */
  readonly port: number
  /** The slot it was asked to kill the owner of. */
  readonly slot: number
}

export interface RedisClusterHandle {
  readonly nodes: readonly ClusterNode[]
  /** What an ioredis `Cluster` needs to find the cluster. */
  readonly startupNodes: readonly { host: string; port: number }[]
  /**
   * SIGKILLs the master that owns `slotOrKey` (a slot number or a key, hash tags honoured) and
   * returns at once; its replica is promoted after the node timeout.
   */
  killMaster(slotOrKey: number | string): Promise<KilledMaster>
  /** Waits until the surviving nodes agree the cluster is ok with every slot served by a live master. */
  waitUntilHealthy(timeoutMs?: number): Promise<void>
  /** The port of the master currently serving `slotOrKey`, as a surviving node sees it. */
  masterOf(slotOrKey: number | string): Promise<number>
  /** Stops every node (the killed ones are already gone). */
  stop(): Promise<void>
}

const HOST = '127.0.0.1'
const SLOTS = 16384

/** Starts a Redis Cluster and waits until every node reports `cluster_state:ok` and full slot coverage. */
export async function startCluster(options: ClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3
  const replicas = options.replicasPerMaster ?? 1
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000
  if (masters < 3) throw new Error(`startCluster: Redis Cluster needs at least 3 masters, got ${masters}`)

  const count = masters * (1 + replicas)
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    // Tests kill masters on purpose; a replica must take over whatever the replication lag.
    '--cluster-replica-validity-factor',
    '0',
    '--cluster-require-full-coverage',
    options.requireFullCoverage === false ? 'no' : 'yes',
    ...(options.password === undefined ? [] : ['--requirepass', options.password, '--masterauth', options.password]),
  ]
  const password = options.password
  const nodes: ClusterNode[] = []
  const dead = new Set<number>()
  try {
    const taken = new Set<number>()
    await Promise.all(
      Array.from({ length: count }, async () => {
        const process = await startNode(args, taken)
        nodes.push({ host: HOST, port: process.port, process })
      }),
    )
    await createCluster(nodes, replicas, password)
    await waitFor('every node to see cluster_state:ok, all slots covered and replicas in sync', readyTimeoutMs, async () =>
      (await Promise.all(nodes.map((node) => nodeIsReady(node.port, count, password)))).every(Boolean),
    )
  } catch (error) {
    await Promise.all(nodes.map((node) => node.process.stop()))
    throw error
  }

  const alive = (): ClusterNode[] => nodes.filter((node) => !dead.has(node.port))

  async function slotOf(slotOrKey: number | string): Promise<number> {
    if (typeof slotOrKey === 'number') return slotOrKey
    return Number(await withClient(alive()[0].port, (redis) => redis.call('CLUSTER', 'KEYSLOT', slotOrKey), password))
  }

  async function masterOf(slotOrKey: number | string): Promise<number> {
    const slot = await slotOf(slotOrKey)
    const ranges = (await withClient(alive()[0].port, (redis) => redis.call('CLUSTER', 'SLOTS'), password)) as SlotRange[]
    const range = ranges.find(([start, end]) => slot >= start && slot <= end)
    if (range === undefined) throw new Error(`no master serves slot ${slot}`)
    return Number(range[2][1])
  }

  const handle: RedisClusterHandle = {
    nodes,
    startupNodes: nodes.map(({ host, port }) => ({ host, port })),
    masterOf,
    async killMaster(slotOrKey) {
      const slot = await slotOf(slotOrKey)
      const port = await masterOf(slot)
      const pid = await withClient(port, async (redis) => Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]), password)
      dead.add(port)
      process.kill(pid, 'SIGKILL')
      return { port, slot }
    },
    async waitUntilHealthy(timeoutMs = readyTimeoutMs) {
      await waitFor('the surviving nodes to agree the cluster is ok again', timeoutMs, async () => {
        const states = await Promise.all(alive().map((node) => survivorIsOk(node.port, dead, password)))
        return states.every(Boolean)
      })
    },
    async stop() {
      await Promise.all(nodes.map((node) => node.process.stop()))
    },
  }
  return handle
}

/** CLUSTER SLOTS rows: [start, end, [host, port, id], ...replicas]. */
type SlotRange = [number, number, [string, number, string], ...unknown[]]

/** `count` free ports whose cluster bus port (port + 10000) is free as well, none of them in `taken`. */
export async function clusterPorts(count: number, taken: Set<number> = new Set()): Promise<number[]> {
  const ports: number[] = []
  while (ports.length < count) {
    const port = await freePort()
    if (!ports.includes(port) && !taken.has(port) && (await portIsFree(port + 10_000))) ports.push(port)
  }
  for (const port of ports) taken.add(port)
  return ports
}

/** One node on a cluster port of its own; a port taken before the node bound it is chosen again. */
async function startNode(args: string[], taken: Set<number>): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const [port] = await clusterPorts(1, taken)
    try {
      return await startRedis(args, port)
    } catch (error) {
      if (attempt >= 3) throw error
    }
  }
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, HOST, () => server.close(() => resolve(true)))
  })
}

function createCluster(nodes: readonly ClusterNode[], replicas: number, password: string | undefined): Promise<void> {
  const addresses = nodes.map((node) => `${node.host}:${node.port}`)
  const auth = password === undefined ? [] : ['-a', password, '--no-auth-warning']
  const args = [...auth, '--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes']
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli --cluster create failed: ${error.message}\n${stdout}\n${stderr}`))
      else resolve()
    })
  })
}

/** A node is ready when it sees the whole cluster as ok and, if a replica, its master link is up. */
async function nodeIsReady(port: number, count: number, password: string | undefined): Promise<boolean> {
  return withClient(
    port,
    async (redis) => {
      const info = fields(String(await redis.call('CLUSTER', 'INFO')))
      if (info.cluster_state !== 'ok' || Number(info.cluster_slots_ok) !== SLOTS) return false
      if (Number(info.cluster_known_nodes) !== count) return false
      const replication = fields(await redis.info('replication'))
      return replication.role === 'master' || replication.master_link_status === 'up'
    },
    password,
  ).catch(() => false)
}

/** After a kill: ok, every slot assigned, and no slot still owned by a dead master. */
async function survivorIsOk(port: number, dead: ReadonlySet<number>, password: string | undefined): Promise<boolean> {
  return withClient(
    port,
    async (redis) => {
      const info = fields(String(await redis.call('CLUSTER', 'INFO')))
      if (info.cluster_state !== 'ok' || Number(info.cluster_slots_assigned) !== SLOTS) return false
      const ranges = (await redis.call('CLUSTER', 'SLOTS')) as SlotRange[]
      return ranges.every((range) => !dead.has(Number(range[2][1])))
    },
    password,
  ).catch(() => false)
}

function fields(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':')
    if (at > 0) out[line.slice(0, at)] = line.slice(at + 1).trim()
  }
  return out
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`Redis Cluster: gave up after ${timeoutMs}ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
