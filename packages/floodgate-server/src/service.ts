// Entry point of `floodgate/service`: run the standalone service in-process, or build its parts.

export { startService, type RunningService, type StartOptions } from './service/server.js'
export { readSettings, serveUsage, SERVE_OPTIONS, type Settings, type StoreSettings, type HostPort } from './service/settings.js'
export { Decider, type DecideInput, type DecideResult, type DescriptorInput, type DescriptorOutcome, type DeciderOptions } from './service/decide.js'
export { ServiceMetrics, type ServiceMetricsOptions } from './service/metrics.js'
export { createHttpServer, type HttpServerOptions, type HealthReport } from './service/http-server.js'
export { createGrpcServer, loadRlsPackage, protoDir, PROTO_LOADER_OPTIONS, type GrpcServerOptions } from './service/grpc-server.js'
export { envoyLimitOf } from './service/envoy-response.js'
