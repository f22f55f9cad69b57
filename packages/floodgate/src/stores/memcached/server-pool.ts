// The server list of a MemcachedStore made from `servers`, replaceable while it runs: a ring and a memjs client per list,
// one connection per server shared by every list that has it, and a removed server closed once no call still uses it.

import { HashRing } from './hash-ring.js'
import type { MemjsClientLike } from './protocol.js'

/** A memjs `Server` (one connection to one memcached), as far as the pool handles it. */
export interface MemjsServer {
  close(): void
}

/** The memjs module, as far as the pool uses it. */
export interface MemjsModule {
  Server: new (host: string, port: number, username: string | undefined, password: string | undefined, options: object) => MemjsServer
  Client: {
    new (servers: MemjsServer[], options: object): MemjsClientLike
    create(servers: string, options: object): MemjsClientLike
  }
}

/** One server list: its ring, a memjs client over its servers, and what the store built on that client. */
export class ServerList<T> {
  /** Calls that started on this list and have not ended. */
  calls = 0
  /** Resolves once this list is retired: superseded, and its last call ended. */
  readonly retired: Promise<void>
  resolveRetired!: () => void
  readonly members: ReadonlySet<string>

  constructor(
    readonly ring: HashRing,
    readonly client: MemjsClientLike,
    readonly ops: T,
  ) {
    this.members = new Set(ring.servers)
    this.retired = new Promise((resolve) => (this.resolveRetired = resolve))
  }

  get servers(): readonly string[] {
    return this.ring.servers
  }

  /** The server that holds `route` (a user key's route, keys.ts). */
  serverOfRoute(route: string): string {
    return this.ring.servers[this.ring.serverOf(route)]
  }
}

/** What `ServerPool.replace` changed. */
export interface Swap {
  added: string[]
  removed: string[]
  /** Resolves once every server no longer listed is closed (the calls that were using it ended first). */
  closed: Promise<void>
}

/**
 * The lists a store's calls run on. A call `enter`s the current list and keeps it to its end, so
 * every step of one decision (charge, refund, peek) goes to the same server and its failure is put
 * down to that server even when the list changes meanwhile. A connection is shared by every list
 * that has its server; it is closed when the last list holding it retires. memjs's clients stay
 * per list (their `getServer` is the list's ring), but the request numbers that pair a reply with
 * its call come from one counter, since two lists' calls may wait on the same connection.
 */
export class ServerPool<T> {
  private current: ServerList<T>
  private readonly live = new Set<ServerList<T>>()
  private readonly connections = new Map<string, { server: MemjsServer; lists: number }>()
  private readonly sequence = { seq: 0 }
  private closed = false

  constructor(
    servers: readonly string[],
    private readonly memjs: MemjsModule,
    private readonly options: object,
    private readonly build: (client: MemjsClientLike) => T,
    // Turns each memjs Server made for a new server into the one to use (its TLS twin, tls-server.ts).
    private readonly adapt: (server: MemjsServer) => MemjsServer = (server) => server,
  ) {
    this.current = this.open(servers)
  }

  /** The list new calls go to. */
  get list(): ServerList<T> {
    return this.current
  }

  /** Starts a call on the current list; give the list back to `leave` when the call has ended. */
  enter(): ServerList<T> {
    const list = this.current
    list.calls++
    return list
  }

  leave(list: ServerList<T>): void {
    if (--list.calls === 0 && list !== this.current) this.retire(list)
  }

  /**
   * Makes `servers` (checked, at least one) the list for calls from now on; undefined when it holds
   * the same servers (the ring ignores order). Calls already running finish on the list they began on.
   */
  replace(servers: readonly string[]): Swap | undefined {
    const before = this.current
    if (servers.length === before.members.size && servers.every((server) => before.members.has(server))) return undefined
    const next = this.open(servers)
    this.current = next
    if (before.calls === 0) this.retire(before)
    const waiting = [...this.live].filter((list) => list !== next).map((list) => list.retired)
    return {
      added: servers.filter((server) => !before.members.has(server)),
      removed: before.servers.filter((server) => !next.members.has(server)),
      closed: Promise.all(waiting).then(nothing),
    }
  }

  /** Closes every connection; calls still running fail (memjs answers them with an error or its timeout). */
  close(): void {
    this.closed = true
    for (const { server } of this.connections.values()) server.close()
    this.connections.clear()
    for (const list of this.live) list.resolveRetired()
    this.live.clear()
  }

  private open(servers: readonly string[]): ServerList<T> {
    const fresh = servers.filter((server) => !this.connections.has(server))
    // memjs parses `host:port` into its Server objects; a throwaway client does that for the new ones.
    const made =
      fresh.length === 0 ? [] : (this.memjs.Client.create(fresh.join(','), this.options).servers as MemjsServer[]).map(this.adapt)
    fresh.forEach((server, i) => this.connections.set(server, { server: made[i], lists: 0 }))
    const connections = servers.map((server) => this.connections.get(server)!)
    for (const connection of connections) connection.lists++
    const ring = new HashRing(servers)
    const client = new this.memjs.Client(
      connections.map((connection) => connection.server),
      this.options,
    )
    // memjs's documented way to choose the server of a key: the list's ring, by the key's route.
    client.getServer = (key: string) => ring.serverOfRecord(key)
    shareSequence(client, this.sequence)
    const list = new ServerList(ring, client, this.build(client))
    this.live.add(list)
    return list
  }

  private retire(list: ServerList<T>): void {
    if (!this.live.delete(list)) return
    if (!this.closed) {
      for (const server of list.servers) {
        const connection = this.connections.get(server)
        if (connection === undefined || --connection.lists > 0) continue
        this.connections.delete(server)
        connection.server.close()
      }
    }
    list.resolveRetired()
  }
}

/**
 * Makes `client` number its requests from `sequence`: memjs keys a connection's waiting calls by that
 * number, so lists that share a connection must never hand out the same one at once. Counted in
 * 32 bits unsigned, as the binary protocol's `opaque` field carries it back. `seq` stays a plain
 * field of the client, written on each step (an accessor would slow every property read of it).
 */
function shareSequence(client: MemjsClientLike, sequence: { seq: number }): void {
  const numbered = client as { seq: number }
  client.incrSeq = () => {
    sequence.seq = (sequence.seq + 1) % 0x1_0000_0000
    numbered.seq = sequence.seq
  }
}

function nothing(): void {}
