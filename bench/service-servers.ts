// The server processes of `npm run bench:service` (bench/service.ts): each contender's server runs in a
// child process of its own, this file in server mode, and reports its ports and CPU time over IPC.

import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/**
 * What runs in one server process. Every contender has a process of its own: sharing one, a
 * contender that leaves garbage behind (promoted objects) makes the next one's rounds pay for its
 * collection, which no server running one of them sees.
 */
export type Role = 'bare' | 'memory' | 'redis' | GrpcPeer
/** The bare gRPC servers (fixed answers) and the grpc-js service path from before. */
export type GrpcPeer = 'floor' | 'grpcJs' | 'grpcJsStatic' | 'connect' | 'grpcJsService'

/** What a server process reports when it is ready: its ports, and the size of its answer where it has one. */
export interface ReadyMessage {
  http?: number
  grpc?: number
  bodyBytes?: number
}

/** A server child process, asked for its CPU time over IPC. */
export interface Servers {
  child: ChildProcess
  ready: ReadyMessage
  cpuMicros(): Promise<number>
}

/** Spawns this file in server mode for one role and waits until it says it is ready. */
export function startServer(role: Role, args: string[]): Promise<Servers> {
  // With this process's own flags: tsx from the sources, none for the test runner's compiled copy.
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--serve', role, ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const cpuMicros = () =>
    new Promise<number>((resolve) => {
      child.once('message', (usage: NodeJS.CpuUsage) => resolve(usage.user + usage.system))
      child.send('cpu')
    })
  return new Promise((resolve, reject) => {
    child.once('message', (ready: ReadyMessage) => resolve({ child, ready, cpuMicros }))
    child.once('exit', (code) => reject(new Error(`benchmark servers exited with ${code}`)))
  })
}

/** Server mode: one role's server (see Role), logging silenced. */
async function serve(role: Role, rulesFile: string, redisUrl: string, checkBytes: string | undefined): Promise<void> {
  const { ready, close } = await startRole(role, rulesFile, redisUrl, Number(checkBytes))
  process.on('message', () => process.send!(process.cpuUsage()))
  process.send!(ready)
  const stop = () => void close().then(() => process.exit(0))
  process.once('SIGTERM', stop)
  // A benchmark that died without stopping its servers must not leave them running.
  process.once('disconnect', stop)
}

async function startRole(
  role: Role,
  rulesFile: string,
  redisUrl: string,
  checkBytes: number,
): Promise<{ ready: ReadyMessage; close: () => Promise<unknown> }> {
  if (role === 'memory' || role === 'redis') {
    const { pino } = await import('pino')
    const { startService } = await import('../packages/floodgate-server/src/service/server.js')
    const { readSettings } = await import('../packages/floodgate-server/src/service/settings.js')
    const base = ['--config', rulesFile, '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--no-watch']
    const args = role === 'redis' ? [...base, '--redis', redisUrl] : base
    const service = await startService(readSettings(args, {}), { logger: pino({ level: 'silent' }) })
    const sample = await fetch(`${service.httpUrl}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ domain: 'bench', descriptors: [[{ key: 'user', value: 'u0' }]] }),
    })
    const bodyBytes = (await sample.text()).length
    return { ready: { http: service.httpPort, grpc: service.grpcPort, bodyBytes }, close: () => service.close() }
  }
  if (role === 'bare') {
    const { default: Fastify } = await import('fastify')
    const answer = { allowed: true, padding: '' }
    answer.padding = 'x'.repeat(Math.max(0, checkBytes - JSON.stringify(answer).length))
    const bare = Fastify()
    bare.post('/bare', async (request) => (request.body === undefined ? {} : answer))
    await bare.listen({ host: '127.0.0.1', port: 0 })
    const port = (bare.server.address() as { port: number }).port
    const sample = await fetch(`http://127.0.0.1:${port}/bare`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    return { ready: { http: port, bodyBytes: (await sample.text()).length }, close: () => bare.close() }
  }
  const transports = await import('./grpc-transports.js')
  const starters: Record<GrpcPeer, () => Promise<{ port: number; close(): Promise<unknown> | void }>> = {
    floor: transports.startHttp2Floor,
    grpcJs: transports.startGrpcJsProtoLoader,
    grpcJsStatic: transports.startGrpcJsStatic,
    connect: transports.startConnectNode,
    grpcJsService: () => transports.startGrpcJsService(rulesFile),
  }
  const server = await starters[role]()
  return { ready: { grpc: server.port }, close: async () => server.close() }
}

if (process.argv[2] === '--serve') void serve(process.argv[3] as Role, process.argv[4], process.argv[5], process.argv[6])
