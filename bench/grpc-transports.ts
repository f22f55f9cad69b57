// Bare gRPC servers for `bench:service`: each decodes a RateLimitRequest and answers one fixed
// RateLimitResponse, without any rule or store, so the table shows what each transport costs by
// itself — and the physical floor: node:http2 answering a fixed gRPC frame without decoding anything.

import http2 from 'node:http2'
import * as grpc from '@grpc/grpc-js'
import { create } from '@bufbuild/protobuf'
import type { ConnectRouter } from '@connectrpc/connect'
import { connectNodeAdapter } from '@connectrpc/connect-node'
import protobuf from 'protobufjs'
import { MemoryStore, RateLimiter } from 'floodgate'
import { loadRules } from 'floodgate/rules'
import { Decider } from '../packages/floodgate-server/src/service/decide.js'
import { fromGrpcRequest, type GrpcRateLimitRequest } from '../packages/floodgate-server/src/service/envoy-request.js'
import { toRlsResponse } from '../packages/floodgate-server/src/service/envoy-response.js'
import { loadRlsPackage, protoDir } from '../packages/floodgate-server/src/service/grpc-server.js'
import { ServiceMetrics } from '../packages/floodgate-server/src/service/metrics.js'
import {
  RateLimitResponse_Code,
  RateLimitResponse_RateLimit_Unit,
  RateLimitResponseSchema,
  RateLimitService,
} from './gen/envoy/service/ratelimit/v3/rls_pb.js'

/** The path every contender serves. */
export const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'

/** The fixed answer, as protobufjs and proto-loader (keepCase) take it. */
const ANSWER = {
  overall_code: 1,
  statuses: [
    {
      code: 1,
      current_limit: { name: '', requests_per_unit: 1_000_000_000, unit: 3 },
      limit_remaining: 999_999_000,
      duration_until_reset: { seconds: 1800, nanos: 0 },
    },
  ],
  response_headers_to_add: [],
}

/** A started bare server: its port and how to stop it. */
export interface BareServer {
  port: number
  close(): Promise<void>
}

function listenHttp2(server: http2.Http2Server): Promise<BareServer> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        close: () => new Promise((done) => server.close(() => done())),
      }),
    )
  })
}

function rlsRoot(): protobuf.Root {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => (target.startsWith('google/') ? protobuf.util.path.resolve(_origin, target) : protoDir() + target)
  root.loadSync('envoy/service/ratelimit/v3/rls.proto', { keepCase: true })
  root.resolveAll()
  return root
}

/** The floor: node:http2 reads the request and answers a fixed, pre-encoded gRPC frame and trailers. */
export function startHttp2Floor(): Promise<BareServer> {
  const root = rlsRoot()
  const bytes = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse').encode(ANSWER).finish()
  const frame = Buffer.alloc(5 + bytes.length)
  frame.writeUInt32BE(bytes.length, 1)
  frame.set(bytes, 5)
  const server = http2.createServer()
  server.on('stream', (stream) => {
    stream.on('data', () => {})
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      stream.end(frame)
    })
  })
  return listenHttp2(server)
}

function listenGrpcJs(server: grpc.Server): Promise<BareServer> {
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve({ port, close: () => new Promise((done) => server.tryShutdown(() => done())) }),
    ),
  )
}

/** grpc-js with @grpc/proto-loader's codecs (the transport the service had before). */
export function startGrpcJsProtoLoader(): Promise<BareServer> {
  const pkg = loadRlsPackage() as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } }
  }
  const server = new grpc.Server()
  const answer = {
    ...ANSWER,
    overall_code: 'OK',
    statuses: [{ ...ANSWER.statuses[0], code: 'OK', current_limit: { ...ANSWER.statuses[0].current_limit, unit: 'HOUR' } }],
  }
  server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
      callback(null, call.request ? answer : answer),
  })
  return listenGrpcJs(server)
}

/**
 * The service's gRPC path as it was before it moved to node:http2: grpc-js and proto-loader around the
 * same Decider, limiter and memory store the service builds (the same rules, metrics and latency
 * histogram), so the before and after run side by side.
 */
export function startGrpcJsService(rulesFile: string): Promise<BareServer> {
  const pkg = loadRlsPackage() as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } }
  }
  const rules = loadRules(rulesFile)
  const metrics = new ServiceMetrics()
  const decider = new Decider({ rules: () => rules, limiter: new RateLimiter({ store: new MemoryStore() }), metrics })
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 })
  server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit: (call: grpc.ServerUnaryCall<GrpcRateLimitRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const started = performance.now()
      const input = fromGrpcRequest(call.request)
      decider.decide(input).then(
        (result) => {
          metrics.observeLatency('grpc', (performance.now() - started) / 1000)
          callback(null, toRlsResponse(result, { now: Date.now() }))
        },
        (error: Error) => callback(error),
      )
    },
  })
  return listenGrpcJs(server)
}

/** grpc-js with static protobufjs codecs: decode and encode straight from and to messages, no object conversion. */
export function startGrpcJsStatic(): Promise<BareServer> {
  const root = rlsRoot()
  const request = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest')
  const response = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse')
  const definition: grpc.ServiceDefinition = {
    ShouldRateLimit: {
      path: SHOULD_RATE_LIMIT,
      requestStream: false,
      responseStream: false,
      requestSerialize: (message: protobuf.Message) => Buffer.from(request.encode(message).finish()),
      requestDeserialize: (bytes: Buffer) => request.decode(bytes),
      responseSerialize: (message: object) => Buffer.from(response.encode(message).finish()),
      responseDeserialize: (bytes: Buffer) => response.decode(bytes),
    },
  }
  const server = new grpc.Server()
  server.addService(definition, {
    ShouldRateLimit: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
      callback(null, call.request ? ANSWER : ANSWER),
  })
  return listenGrpcJs(server)
}

/** Connect-ES (@connectrpc/connect-node) speaking the gRPC protocol on node:http2, with protoc-gen-es code. */
export function startConnectNode(): Promise<BareServer> {
  const answer = create(RateLimitResponseSchema, {
    overallCode: RateLimitResponse_Code.OK,
    statuses: [
      {
        code: RateLimitResponse_Code.OK,
        currentLimit: { name: '', requestsPerUnit: 1_000_000_000, unit: RateLimitResponse_RateLimit_Unit.HOUR },
        limitRemaining: 999_999_000,
        durationUntilReset: { seconds: 1800n, nanos: 0 },
      },
    ],
  })
  const routes = (router: ConnectRouter) =>
    router.service(RateLimitService, { shouldRateLimit: (request) => (request.domain === '' ? answer : answer) })
  const server = http2.createServer(connectNodeAdapter({ routes, grpc: true, connect: false, grpcWeb: false }))
  return listenHttp2(server)
}
