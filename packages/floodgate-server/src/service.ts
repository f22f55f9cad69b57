// Entry point of `floodgate-server`: run the standalone service in-process. Its parts (the Envoy
// decider, the HTTP and gRPC servers, metrics, the proto loading) are internals its tests import by path.

export { startService, type RunningService, type StartOptions } from './service/server.js'
export { readSettings, type Settings, type StoreSettings, type HostPort } from './service/settings.js'
