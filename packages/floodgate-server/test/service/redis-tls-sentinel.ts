// A Sentinel and its master, both serving TLS only (client certificates required), for the Redis TLS tests.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { freePort, startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { stopProcess, waitForPort } from '../../../floodgate/test/support/ports.js'
import { tlsServerArgs, type TestCerts } from './redis-tls-certs.js'

export interface TlsSentinel {
  name: string
  /** The Sentinel's TLS port. */
  port: number
  master: RedisProcess
  stop(): Promise<void>
}

/** Starts a TLS master and a Sentinel (TLS port only, reaching the master over TLS too) watching it as `name`. */
export async function startTlsSentinel(certs: TestCerts, name = 'tlsmaster'): Promise<TlsSentinel> {
  const masterPort = await freePort()
  const master = await startRedis(tlsServerArgs(certs, masterPort), masterPort)
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), `floodgate-tls-sentinel-${port}-`))
  const config = join(dir, 'sentinel.conf')
  writeFileSync(
    config,
    [
      'bind 127.0.0.1',
      'port 0',
      `tls-port ${port}`,
      `tls-cert-file ${certs.server.cert}`,
      `tls-key-file ${certs.server.key}`,
      `tls-ca-cert-file ${certs.ca}`,
      'tls-auth-clients yes',
      // The Sentinel reaches the master over TLS as its client, which requires a client certificate: the
      // server one is for serverAuth only, and with it the master refuses the Sentinel (which then still
      // names the master it was told of, so a test would pass on a Sentinel that never reached it).
      'tls-replication yes',
      `tls-client-cert-file ${certs.client.cert}`,
      `tls-client-key-file ${certs.client.key}`,
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      '',
    ].join('\n'),
  )
  const child: ChildProcess = spawn('redis-server', [config, '--sentinel'], { stdio: ['ignore', 'ignore', 'inherit'] })
  child.unref()
  process.once('exit', () => child.kill('SIGKILL'))
  try {
    await waitForPort('redis-sentinel', '127.0.0.1', port, 5_000)
    await waitUntilMasterSeen(certs, port, name)
  } catch (error) {
    await stopProcess(child)
    await master.stop()
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
  return {
    name,
    port,
    master,
    async stop() {
      await stopProcess(child)
      await master.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Waits (for a state) until the Sentinel has reached its master over TLS: its flags say `master`, nothing else. */
async function waitUntilMasterSeen(certs: TestCerts, port: number, name: string): Promise<void> {
  const tls = { ca: readFileSync(certs.ca), cert: readFileSync(certs.client.cert), key: readFileSync(certs.client.key) }
  const sentinel = new Redis({ host: '127.0.0.1', port, tls, maxRetriesPerRequest: 1 })
  sentinel.on('error', () => {})
  const deadline = Date.now() + 30_000
  try {
    for (;;) {
      const fields = (await sentinel.call('SENTINEL', 'MASTER', name).catch(() => [])) as string[]
      const flags = fields[fields.indexOf('flags') + 1]
      if (flags === 'master') return
      if (Date.now() > deadline) throw new Error(`the TLS Sentinel never reached its master: flags ${flags ?? 'none'}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } finally {
    sentinel.disconnect()
  }
}
