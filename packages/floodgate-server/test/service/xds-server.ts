// A real xDS management server for the tests: grpc-js serving ADS state-of-the-world from the service's own protos.

import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { protoDir } from '../../src/service/grpc-server.js'
import { RATE_LIMIT_CONFIG_TYPE_URL, rateLimitConfigType } from '../../src/service/xds/rate-limit-config.js'

/** A RateLimitConfig as protobufjs takes it (snake_case; unit by name). */
export interface RateLimitConfigMessage {
  name: string
  domain: string
  descriptors: object[]
}

/** One DiscoveryRequest the server received, with the metadata of its stream. */
export interface ReceivedRequest {
  version_info: string
  response_nonce: string
  type_url: string
  node: { id: string; metadata?: { fields: Record<string, { stringValue?: string }> } } | null
  error_detail: { code: number; message: string } | null
  metadata: grpc.Metadata
}

type Resource = { type_url: string; value: Buffer }

/**
 * Holds one snapshot (version + resources) and sends it on every stream: at once when a stream
 * opens, and to every open stream on `push`. Each response gets a fresh nonce. Every request is
 * kept in `requests`, and `waitForRequest` resolves on the first (past or future) that matches.
 */
export class TestXdsServer {
  readonly requests: ReceivedRequest[] = []
  port = 0
  #server: grpc.Server | undefined
  #streams = new Set<grpc.ServerDuplexStream<ReceivedRequest, object>>()
  #snapshot: { version: string; resources: Resource[] } | undefined
  #nonce = 0
  #waiters: { match: (r: ReceivedRequest) => boolean; resolve: (r: ReceivedRequest) => void }[] = []
  readonly #type = rateLimitConfigType(protoDir())

  /** Listens on 127.0.0.1 (`port`, or a free one); `credentials` for TLS. Call again after `stop` to restart. */
  async start(credentials = grpc.ServerCredentials.createInsecure(), port = this.port): Promise<number> {
    const definition = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [protoDir()],
    })
    const pkg = grpc.loadPackageDefinition(definition) as any
    const server = new grpc.Server()
    server.addService(pkg.envoy.service.discovery.v3.AggregatedDiscoveryService.service, {
      StreamAggregatedResources: (stream: grpc.ServerDuplexStream<ReceivedRequest, object>) => this.#serve(stream),
    })
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
    )
    this.#server = server
    return this.port
  }

  /** Replaces the snapshot with `configs` at `version` and sends it on every open stream. */
  push(version: string, configs: RateLimitConfigMessage[]): void {
    this.pushResources(
      version,
      configs.map((config) => ({
        type_url: RATE_LIMIT_CONFIG_TYPE_URL,
        value: Buffer.from(this.#type.encode(this.#type.fromObject(config)).finish()),
      })),
    )
  }

  /** As `push`, with resources as they are (e.g. of another type). */
  pushResources(version: string, resources: Resource[]): void {
    this.#snapshot = { version, resources }
    for (const stream of this.#streams) this.#send(stream)
  }

  /** The first request received (already or later) for which `match` is true. */
  waitForRequest(match: (request: ReceivedRequest) => boolean): Promise<ReceivedRequest> {
    const seen = this.requests.find(match)
    if (seen !== undefined) return Promise.resolve(seen)
    return new Promise((resolve) => this.#waiters.push({ match, resolve }))
  }

  /** Cuts every stream and stops listening (the port is kept for `start`). */
  async stop(): Promise<void> {
    for (const stream of this.#streams) stream.destroy()
    this.#streams.clear()
    this.#server?.forceShutdown()
    this.#server = undefined
  }

  #serve(stream: grpc.ServerDuplexStream<ReceivedRequest, object>): void {
    this.#streams.add(stream)
    let first = true
    stream.on('data', (request: Omit<ReceivedRequest, 'metadata'>) => {
      const received = { ...request, metadata: stream.metadata } as ReceivedRequest
      this.requests.push(received)
      for (const waiter of [...this.#waiters]) {
        if (!waiter.match(received)) continue
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1)
        waiter.resolve(received)
      }
      // As a state-of-the-world server: the first request of a stream gets the snapshot, unless
      // the client already holds its version.
      if (first && this.#snapshot !== undefined && request.version_info !== this.#snapshot.version) this.#send(stream)
      first = false
    })
    const forget = () => this.#streams.delete(stream)
    stream.on('error', forget)
    stream.on('end', () => {
      forget()
      stream.end()
    })
  }

  #send(stream: grpc.ServerDuplexStream<ReceivedRequest, object>): void {
    const snapshot = this.#snapshot
    if (snapshot === undefined) return
    stream.write({
      version_info: snapshot.version,
      resources: snapshot.resources,
      type_url: RATE_LIMIT_CONFIG_TYPE_URL,
      nonce: `n${++this.#nonce}`,
    })
  }
}

/** A RateLimitConfig of one domain with one `key` limited to `requests` per `unit`. */
export function limitConfig(domain: string, key: string, requests: number, unit = 'HOUR'): RateLimitConfigMessage {
  return { name: `${domain}-config`, domain, descriptors: [{ key, rate_limit: { unit, requests_per_unit: requests } }] }
}
