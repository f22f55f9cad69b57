// A Redis Cluster that serves TLS only, on its client ports and its bus (tls-cluster), client certificates
// required, made with `redis-cli --tls --cluster create`, for the Redis TLS tests.

import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { clusterPorts } from '../../../floodgate/test/support/redis-cluster.js'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { tlsServerArgs, type TestCerts } from './redis-tls-certs.js'
import type { CertFiles } from './tls-certs.js'

export interface TlsCluster {
  /** The masters' TLS ports, in the order they were started (each holds a third of the slots). */
  readonly ports: readonly number[]
  /** `host:port,host:port,…`, as upstream's REDIS_URL for REDIS_TYPE=cluster names the nodes. */
  readonly url: string
  /** The test's own client of one node (the CA and a client certificate, the name not checked). */
  client(port: number): Redis
  stop(): Promise<void>
}

export interface TlsClusterOptions {
  /** The nodes' server certificate (default `certs.server`, for 127.0.0.1 and localhost). */
  server?: CertFiles
  /**
   * A name the nodes announce instead of their IP (cluster-announce-hostname with
   * cluster-preferred-endpoint-type hostname), as nodes with certificates for names do; the URL uses it too.
   */
  hostname?: string
}

const SLOTS = 16384

/** Starts three masters (no replicas) serving TLS only, joins them, and waits until each sees cluster_state:ok. */
export async function startTlsCluster(certs: TestCerts, options: TlsClusterOptions = {}): Promise<TlsCluster> {
  const server = options.server ?? certs.server
  const hostname = options.hostname
  const ports = await clusterPorts(3)
  const args = (port: number) => [
    ...tlsServerArgs(certs, port, server),
    ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'],
    // The bus and replication over TLS too. On them a node is the client of its peer, which requires a
    // client certificate (tls-auth-clients yes): the server one is for serverAuth only, so the client one goes.
    ...['--tls-cluster', 'yes', '--tls-replication', 'yes'],
    ...['--tls-client-cert-file', certs.client.cert, '--tls-client-key-file', certs.client.key],
    ...(hostname === undefined ? [] : ['--cluster-announce-hostname', hostname, '--cluster-preferred-endpoint-type', 'hostname']),
  ]
  const processes: RedisProcess[] = []
  const clients: Redis[] = []
  const tls = {
    ca: readFileSync(certs.ca),
    cert: readFileSync(certs.client.cert),
    key: readFileSync(certs.client.key),
    checkServerIdentity: () => undefined,
  }
  const client = (port: number) => {
    const redis = new Redis({ host: '127.0.0.1', port, tls, maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    clients.push(redis)
    return redis
  }
  const stop = async () => {
    for (const redis of clients) redis.disconnect()
    await Promise.all(processes.map((node) => node.stop()))
  }
  try {
    for (const node of await Promise.all(ports.map((port) => startRedis(args(port), port)))) processes.push(node)
    await createCluster(certs, ports)
    const probes = ports.map(client)
    await waitFor('every node to see cluster_state:ok with all slots served', async () => {
      const infos = await Promise.all(probes.map((redis) => redis.call('CLUSTER', 'INFO').then(String, () => '')))
      return infos.every((info) => /cluster_state:ok/.test(info) && new RegExp(`cluster_slots_ok:${SLOTS}\\b`).test(info))
    })
  } catch (error) {
    await stop()
    throw error
  }
  return { ports, url: ports.map((port) => `${hostname ?? '127.0.0.1'}:${port}`).join(','), client, stop }
}

function createCluster(certs: TestCerts, ports: readonly number[]): Promise<void> {
  const tlsArgs = ['--tls', '--cacert', certs.ca, '--cert', certs.client.cert, '--key', certs.client.key]
  const args = [...tlsArgs, '--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes']
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli --tls --cluster create failed: ${error.message}\n${stdout}\n${stderr}`))
      else resolve()
    })
  })
}

/** Polls `check` until it holds (a state, not a time); the bound only turns a cluster that never forms into an error. */
async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`TLS Redis Cluster: gave up after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
