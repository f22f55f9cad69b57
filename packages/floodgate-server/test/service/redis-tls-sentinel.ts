// A Sentinel and its master, both serving TLS only (client certificates required), for the Redis TLS tests.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
      // The Sentinel reaches the master over TLS, as a client with the server's own pair.
      'tls-replication yes',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      '',
    ].join('\n'),
  )
  const child: ChildProcess = spawn('redis-server', [config, '--sentinel'], { stdio: ['ignore', 'ignore', 'inherit'] })
  child.unref()
  await waitForPort('redis-sentinel', '127.0.0.1', port, 5_000)
  process.once('exit', () => child.kill('SIGKILL'))
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
