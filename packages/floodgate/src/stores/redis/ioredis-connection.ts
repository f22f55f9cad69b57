// The Connection adapter for ioredis (5 and 6) `Redis` and `Cluster`, recognised by shape.

import { once } from 'node:events'
import type { Connection, Unsubscribe } from './connection.js'

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
  callBuffer(command: string, ...args: (string | number)[]): Promise<unknown>
  del(...keys: string[]): Promise<unknown>
  connect(): Promise<void>
  quit(): Promise<unknown>
  disconnect(): void
  /** Cluster only. */
  refreshSlotsCache?(callback?: (error?: Error | null) => void): void
  on(event: string, listener: (...args: unknown[]) => void): unknown
  removeListener(event: string, listener: (...args: unknown[]) => void): unknown
}

/**
 * Every command's Buffer variant exists at run time in ioredis 5 and 6, though 6's types leave
 * these two out: so they are looked for, not required of the type.
 */
interface EvalBufferCommands {
  evalshaBuffer?(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
  evalBuffer?(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
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
  const commands = client as IoredisLike & EvalBufferCommands
  // evalshaBuffer builds the same Command as `new Command('evalsha', args, { replyEncoding: null })`
  // and hands it to sendCommand, which writes it to the socket at once; only a client made with
  // `enableAutoPipelining` defers it to the next tick (as it does every command). callBuffer is the
  // fallback only: ioredis's auto-pipeline loses a generic call's command name and sends the SHA as one.
  const evalBuffer = (command: 'evalsha' | 'eval', script: string, keys: readonly string[], args: readonly string[]): Promise<unknown> => {
    const named = command === 'evalsha' ? commands.evalshaBuffer : commands.evalBuffer
    if (typeof named === 'function') return named.call(client, script, keys.length, ...keys, ...args)
    return client.callBuffer(command, script, keys.length, ...keys, ...args)
  }
  return {
    client,
    library: 'ioredis',
    isCluster,
    isReady: () => client.status === 'ready',
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
      const ended = once(client as unknown as NodeJS.EventEmitter, 'end')
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
