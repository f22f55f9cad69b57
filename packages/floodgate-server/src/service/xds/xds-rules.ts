// Rules from an xDS management server: an ADS state-of-the-world stream of RateLimitConfig resources.

import { EventEmitter } from 'node:events'
import { readFileSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { FloodgateError } from 'floodgate'
import { ConfigError, formatIssue, parseRules, RuleSet, type RuleSetOptions } from 'floodgate/rules'
import { RATE_LIMIT_CONFIG_TYPE_URL, rateLimitConfigType, ruleSourcesOf, type AnyResource } from './rate-limit-config.js'
import type { XdsBackoff, XdsSettings } from './xds-settings.js'

/** gRPC's INVALID_ARGUMENT: the code of a NACK's error_detail (the resources, not the stream, are at fault). */
const INVALID_ARGUMENT = 3

export interface XdsRulesOptions extends RuleSetOptions {
  /** The folder of Floodgate's .proto files. */
  protoDir: string
  /** Timers for the reconnect waits (default the global ones); tests inject their own. */
  timers?: { setTimeout: typeof setTimeout; clearTimeout: typeof clearTimeout }
  /** Random numbers in [0, 1) for the jitter (default Math.random). */
  random?: () => number
}

interface DiscoveryResponse {
  version_info: string
  resources: AnyResource[]
  type_url: string
  nonce: string
}

type AdsStream = grpc.ClientDuplexStream<object, DiscoveryResponse>
type AdsClient = grpc.Client & { StreamAggregatedResources(metadata: grpc.Metadata): AdsStream }

/**
 * Keeps `current` in step with the RateLimitConfig resources a management server holds for this
 * node, as envoyproxy/ratelimit's GRPC_XDS_SOTW provider does. Each response carries the whole set
 * (state of the world): when every resource loads as rules (the YAML's validation), `current` is
 * swapped in one assignment, `'reload'` is emitted and the response is ACKed with its version and
 * nonce; otherwise it is NACKed (the last accepted version, the nonce, and the issues in
 * error_detail), `'error'` is emitted and the previous rules keep serving.
 *
 * Until the first config arrives `current` holds no domain, so no descriptor matches a rule and
 * nothing is limited; `loaded` tells that state apart (health uses it). When the stream fails or
 * ends, it reconnects after an exponential backoff (XDS_CLIENT_BACKOFF_*), reset by each response,
 * and asks again with the last accepted version.
 */
export class XdsRules extends EventEmitter {
  /** The issues of the latest NACKed response, cleared by the next accepted one. */
  lastError: ConfigError | undefined
  /** The version of the latest accepted response ('' before the first). */
  version = ''
  readonly #settings: XdsSettings
  readonly #ruleOptions: RuleSetOptions
  readonly #type: ReturnType<typeof rateLimitConfigType>
  readonly #client: AdsClient
  readonly #timers: NonNullable<XdsRulesOptions['timers']>
  readonly #random: () => number
  #current: RuleSet
  #loaded = false
  #stream: AdsStream | undefined
  #timer: NodeJS.Timeout | undefined
  #failures = 0
  #closed = false

  constructor(settings: XdsSettings, options: XdsRulesOptions) {
    super()
    this.#settings = settings
    this.#ruleOptions = { wildcardOrder: options.wildcardOrder, mergeDomains: options.mergeDomains }
    this.#timers = options.timers ?? { setTimeout, clearTimeout }
    this.#random = options.random ?? Math.random
    this.#type = rateLimitConfigType(options.protoDir)
    this.#current = new RuleSet([], [], this.#ruleOptions)
    const definition = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [options.protoDir],
    })
    const ads = grpc.loadPackageDefinition(definition) as unknown as {
      envoy: { service: { discovery: { v3: { AggregatedDiscoveryService: grpc.ServiceClientConstructor } } } }
    }
    const Client = ads.envoy.service.discovery.v3.AggregatedDiscoveryService
    const channelOptions: grpc.ChannelOptions = {}
    if (settings.maxMessageBytes !== undefined) channelOptions['grpc.max_receive_message_length'] = settings.maxMessageBytes
    if (settings.tls?.san !== undefined) channelOptions['grpc.ssl_target_name_override'] = settings.tls.san
    this.#client = new Client(settings.serverUrl, credentialsOf(settings), channelOptions) as unknown as AdsClient
    this.#open()
  }

  /** The rules to use now; replaced whole on every accepted response. */
  get current(): RuleSet {
    return this.#current
  }

  /** True once a config from the management server has been accepted (health: at least one config loaded). */
  get loaded(): boolean {
    return this.#loaded
  }

  /** The server pushes; there is nothing to re-read. True when the latest response was accepted. */
  reload(): boolean {
    return this.lastError === undefined
  }

  /** Ends the stream and stops reconnecting. */
  async close(): Promise<void> {
    this.#closed = true
    this.#timers.clearTimeout(this.#timer)
    this.#stream?.cancel()
    this.#stream = undefined
    this.#client.close()
  }

  #open(): void {
    if (this.#closed) return
    const metadata = new grpc.Metadata()
    for (const [name, value] of Object.entries(this.#settings.headers)) metadata.add(name, value)
    const stream = this.#client.StreamAggregatedResources(metadata)
    this.#stream = stream
    let failed = false
    const retry = (reason: string) => {
      if (failed || this.#closed || this.#stream !== stream) return
      failed = true
      this.#stream = undefined
      stream.cancel()
      this.#reconnectAfterFailure(reason)
    }
    stream.on('data', (response: DiscoveryResponse) => this.#receive(stream, response))
    stream.on('error', (error: Error) => retry(error.message))
    stream.on('end', () => retry('the management server ended the stream'))
    // The first request names the node; it also carries the last accepted version, so a server
    // that still holds that version need not send it again after a reconnect.
    stream.write(this.#request(this.version, ''))
  }

  #receive(stream: AdsStream, response: DiscoveryResponse): void {
    this.#failures = 0
    let next: RuleSet
    try {
      if (response.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
        throw new Error(`response of type ${response.type_url}; only ${RATE_LIMIT_CONFIG_TYPE_URL} was asked for`)
      }
      const sources = ruleSourcesOf(response.resources, this.#type)
      // An empty set is a valid state of the world: the server holds no config for this node.
      next = sources.length === 0 ? new RuleSet([], [], this.#ruleOptions) : parseRules(sources, this.#ruleOptions)
    } catch (error) {
      const configError =
        error instanceof ConfigError ? error : new ConfigError([{ file: 'xds', path: '', message: (error as Error).message }])
      stream.write(this.#request(this.version, response.nonce, configError.issues.map(formatIssue).join('; ')))
      this.lastError = configError
      if (this.listenerCount('error') > 0) this.emit('error', configError)
      return
    }
    this.#current = next
    this.#loaded = true
    this.version = response.version_info
    this.lastError = undefined
    stream.write(this.#request(response.version_info, response.nonce))
    this.emit('reload', next)
  }

  /** A DiscoveryRequest: an ACK when `error` is undefined, a NACK otherwise (version = the last accepted one). */
  #request(version: string, nonce: string, error?: string): object {
    // protobufjs names the fields of its built-in google.protobuf.Value in camelCase, whatever keepCase says.
    const metadata = Object.fromEntries(Object.entries(this.#settings.nodeMetadata).map(([key, value]) => [key, { stringValue: value }]))
    return {
      version_info: version,
      node: { id: this.#settings.nodeId, metadata: { fields: metadata }, user_agent_name: 'floodgate' },
      resource_names: [],
      type_url: RATE_LIMIT_CONFIG_TYPE_URL,
      response_nonce: nonce,
      error_detail: error === undefined ? null : { code: INVALID_ARGUMENT, message: error },
    }
  }

  #reconnectAfterFailure(reason: string): void {
    const wait = backoffMs(this.#settings.backoff, this.#failures++, this.#random)
    this.emit('disconnect', { reason, retryInMs: wait })
    this.#timer = this.#timers.setTimeout(() => this.#open(), wait)
  }
}

export interface XdsRules {
  on(event: 'reload', listener: (rules: RuleSet) => void): this
  on(event: 'error', listener: (error: ConfigError) => void): this
  on(event: 'disconnect', listener: (info: { reason: string; retryInMs: number }) => void): this
  once(event: 'reload', listener: (rules: RuleSet) => void): this
  once(event: 'error', listener: (error: ConfigError) => void): this
  once(event: 'disconnect', listener: (info: { reason: string; retryInMs: number }) => void): this
}

/**
 * The wait before reconnect number `attempt` (0 for the first): the initial interval doubled per
 * failed attempt up to the maximum, and with jitter shortened at random by up to `randomFactor`, so
 * that a fleet restarted with its management server does not reconnect in step.
 */
export function backoffMs(backoff: XdsBackoff, attempt: number, random: () => number = Math.random): number {
  const full = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(attempt, 30))
  return backoff.jitter ? Math.round(full * (1 - backoff.randomFactor * random())) : full
}

function credentialsOf(settings: XdsSettings): grpc.ChannelCredentials {
  const tls = settings.tls
  if (tls === undefined) return grpc.credentials.createInsecure()
  const read = (name: string, path: string | undefined) => {
    if (path === undefined) return null
    try {
      return readFileSync(path)
    } catch (error) {
      throw new FloodgateError('INVALID_OPTION', `${name}=${path}: cannot read it: ${(error as Error).message}`)
    }
  }
  return grpc.credentials.createSsl(
    read('CONFIG_GRPC_XDS_SERVER_TLS_CACERT', tls.caCert),
    read('CONFIG_GRPC_XDS_CLIENT_TLS_KEY', tls.clientKey),
    read('CONFIG_GRPC_XDS_CLIENT_TLS_CERT', tls.clientCert),
  )
}
