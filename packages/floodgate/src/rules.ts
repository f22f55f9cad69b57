// The `floodgate/rules` entry point: envoyproxy/ratelimit-compatible rules, matcher and hot reload.

export * from './rules/index.js'
