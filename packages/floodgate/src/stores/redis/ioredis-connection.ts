// The Connection adapter for ioredis (5 and 6) `Redis` and `Cluster`, recognised by shape.

import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { Connection, ScriptArgument, Unsubscribe } from './connection.js'

/**
 * The part of an ioredis `Redis` or `Cluster` (any copy, version 5 or 6) that RedisStore uses.
 * Written out here so that the store's types never need ioredis installed.
 */
export interface IoredisLike {
  /** `wait`, `connecting`, `connect`, `ready`, `close`, `reconnecting` or `end`. */
  readonly status: string
  readonly isCluster: boolean
  readonly options: object
  /** Cluster only: the nodes (`host:port`, master first) serving each slot. */
  readonly slots?: ReadonlyArray<ReadonlyArray<string> | undefined>
  callBuffer(command: string, ...args: (ScriptArgument | number)[]): Promise<unknown>
  del(...keys: string[]): Promise<unknown>
  connect(): Promise<void>
  quit(): Promise<unknown>
  disconnect(): void
  /** Cluster only. */
  refreshSlotsCache?(callback?: (error?: Error | null) => void): void
  on(event: string, listener: (...args: unknown[]) => void): unknown
  removeListener(event: string, listener: (...args: unknown[]) => void): unknown
}

/** ioredis's Command class (5 and 6). */
type CommandClass = new (name: string, args: (ScriptArgument | number)[], options: { replyEncoding: null }) => object

/**
 * What the store looks for on an ioredis client at run time rather than requiring of its type:
 * `sendCommand`, which takes a Command of the client's own copy of ioredis; and the Buffer
 * variants of EVALSHA and EVAL, which exist in 5 and 6 though 6's types leave them out.
 */
interface IoredisInternals {
  sendCommand?(command: object): Promise<unknown>
  evalshaBuffer?(sha: string, numKeys: number, ...keysAndArgs: ScriptArgument[]): Promise<unknown>
  evalBuffer?(script: string, numKeys: number, ...keysAndArgs: ScriptArgument[]): Promise<unknown>
  /** A standalone client's socket (a Cluster has none of its own). */
  stream?: { writable?: boolean }
}

const moduleCache = createRequire(import.meta.url).cache
const IOREDIS_CLASS_FILE = /[\\/]ioredis[^\\/]*[\\/]built[\\/](?:Redis|cluster[\\/]index)\.js$/

/**
 * The Command class of the copy of ioredis that made `client` (the app's, whichever version and
 * wherever installed): the loaded `Redis.js` or `cluster/index.js` whose class is the client's, and
 * the `Command.js` beside it. ioredis mixes EventEmitter into its classes, so `client.constructor`
 * does not lead there. Undefined if none is found; the store then sends commands by name.
 */
function commandClassOf(client: object): CommandClass | undefined {
  const prototype = Object.getPrototypeOf(client)
  for (const [file, loaded] of Object.entries(moduleCache)) {
    if (!IOREDIS_CLASS_FILE.test(file)) continue
    const exported = (loaded?.exports as { default?: { prototype?: unknown } } | undefined)?.default
    if (exported?.prototype !== prototype) continue
    const built = file.endsWith('index.js') ? dirname(dirname(file)) : dirname(file)
    const command = (moduleCache[join(built, 'Command.js')]?.exports as { default?: unknown } | undefined)?.default
    return typeof command === 'function' ? (command as CommandClass) : undefined
  }
  return undefined
}

/** An ioredis client: ioredis alone has `callBuffer` and a string `status`. */
export function isIoredis(client: unknown): client is IoredisLike {
  if (client === null || typeof client !== 'object') return false
  const candidate = client as Partial<Record<keyof IoredisLike, unknown>>
  return typeof candidate.callBuffer === 'function' && typeof candidate.status === 'string' && typeof candidate.on === 'function'
}

export function ioredisConnection(client: IoredisLike): Connection {
  const listen = (event: string, listener: (...args: unknown[]) => void): Unsubscribe => {
    client.on(event, listener)
    return () => client.removeListener(event, listener)
  }
  const isCluster = client.isCluster === true
  const internals = client as IoredisLike & IoredisInternals
  const Command = commandClassOf(client)
  // A Command handed to sendCommand is written to the socket at once, even on a client made with
  // `enableAutoPipelining`, whose pipeline would hold it until the next tick: a Lane sends its next
  // call while answering the last one, and every caller of that answer would wait for the write.
  // Without the class, the Buffer variant of the command by name; never callBuffer first:
  // ioredis's auto-pipeline loses a generic call's command name.
  const evalBuffer = (
    command: 'evalsha' | 'eval',
    script: string,
    keys: readonly string[],
    args: readonly ScriptArgument[],
  ): Promise<unknown> => {
    if (Command !== undefined && typeof internals.sendCommand === 'function') {
      return internals.sendCommand(new Command(command, [script, keys.length, ...keys, ...args], { replyEncoding: null }))
    }
    const named = command === 'evalsha' ? internals.evalshaBuffer : internals.evalBuffer
    if (typeof named === 'function') return named.call(client, script, keys.length, ...keys, ...args)
    return client.callBuffer(command, script, keys.length, ...keys, ...args)
  }
  return {
    client,
    library: 'ioredis',
    isCluster,
    // After disconnect() the status stays 'ready' until the socket has closed, but ioredis no longer
    // writes: it queues a command offline and sends it after reconnecting, long after its callers were
    // answered (a lane's call sent in that moment, e.g. when its stall timer fires on a busy machine).
    isReady: () => client.status === 'ready' && (isCluster || internals.stream?.writable !== false),
    status: () => client.status,
    isIdle: () => client.status === 'wait',
    connect: () => void client.connect().catch(ignore),
    onReady: (listener) => listen('ready', listener),
    // ioredis reports a failed attempt and a lost connection alike with 'close'; 'error' only
    // reaches listeners the client's owner added.
    onDown: (listener) => listen('close', () => listener()),
    onLost: (listener) => (isCluster ? nothing : listen('close', listener)),
    evalBuffer,
    masterOf: (slot) => client.slots?.[slot]?.[0],
    refreshSlots:
      isCluster && typeof client.refreshSlotsCache === 'function'
        ? () => new Promise<void>((resolve) => client.refreshSlotsCache!(() => resolve()))
        : undefined,
    slotMapSignature: () => slotMapSignature((slot) => client.slots?.[slot]?.[0]),
    del: (keys) => client.del(...keys),
    keyPrefix: () => {
      const options = client.options as { keyPrefix?: string; redisOptions?: { keyPrefix?: string } }
      return options.keyPrefix || options.redisOptions?.keyPrefix || undefined
    },
    close: async () => {
      if (client.status === 'end') return
      // Not events.once: it rejects on an 'error' first, and a connection attempt failing while the
      // client closes (a refused TLS handshake, a reset) would then fail close() itself.
      const ended = new Promise((resolve) => (client as unknown as NodeJS.EventEmitter).once('end', resolve))
      // QUIT lets replies in flight arrive first; a client that is not connected just drops its socket.
      if (client.status === 'ready') await client.quit().catch(() => client.disconnect())
      else client.disconnect()
      await ended
    },
  }
}

/** Runs of slots with one master, as text: `0-5460 a:1,5461-10922 b:2,…`. Only read on failure paths. */
export function slotMapSignature(masterOf: (slot: number) => string | undefined): string {
  const parts: string[] = []
  let start = 0
  let current = masterOf(0)
  for (let slot = 1; slot <= 16384; slot++) {
    const master = slot < 16384 ? masterOf(slot) : undefined
    if (slot < 16384 && master === current) continue
    parts.push(`${start}-${slot - 1} ${current ?? '?'}`)
    start = slot
    current = master
  }
  return parts.join(',')
}

function ignore(): void {}
function nothing(): void {}
