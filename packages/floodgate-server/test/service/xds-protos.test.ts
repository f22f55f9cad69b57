// The trimmed Envoy discovery protos of the service against the official ones (@grpc/grpc-js-xds ships Envoy's API).

import { it } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import protobuf from 'protobufjs'
import { protoDir } from '../../src/service/grpc-server.js'

function load(roots: string[], files: string[]): protobuf.Root {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => {
    if (target.startsWith('google/protobuf/')) return target
    for (const dir of roots) {
      try {
        return require.resolve(join(dir, target))
      } catch {}
    }
    return target
  }
  root.loadSync(files, { keepCase: true })
  return root
}

const require = createRequire(import.meta.url)

it('every message and field of the trimmed discovery protos has the official name, number and type', () => {
  const deps = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps')
  const official = load(
    ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((dir) => join(deps, dir)),
    ['envoy/service/discovery/v3/ads.proto'],
  )
  const ours = load([protoDir()], ['envoy/service/discovery/v3/ads.proto'])
  const messages = [
    'envoy.service.discovery.v3.DiscoveryRequest',
    'envoy.service.discovery.v3.DiscoveryResponse',
    'envoy.config.core.v3.Node',
    'google.rpc.Status',
  ]
  for (const name of messages) {
    const theirs = official.lookupType(name)
    for (const field of ours.lookupType(name).fieldsArray) {
      const match = theirs.fields[field.name]
      assert.ok(match, `${name}.${field.name} is not in the official proto`)
      assert.deepEqual([field.id, field.type, field.repeated], [match.id, match.type, match.repeated], `${name}.${field.name}`)
    }
  }
  const method = (root: protobuf.Root) =>
    root.lookupService('envoy.service.discovery.v3.AggregatedDiscoveryService').methods.StreamAggregatedResources
  const [a, b] = [method(ours), method(official)]
  assert.deepEqual([a.requestType, a.responseType, a.requestStream, a.responseStream], [b.requestType, b.responseType, true, true])
})
