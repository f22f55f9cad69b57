// envoyproxy/ratelimit's RateLimitConfig xDS resources, decoded and written as the YAML rules they stand for.

import protobuf from 'protobufjs'
import type { RuleSource } from 'floodgate/rules'

/** The type URL of a RateLimitConfig resource, as control planes (Envoy Gateway, go-control-plane) send it. */
export const RATE_LIMIT_CONFIG_TYPE_URL = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig'

/** A decoded google.protobuf.Any, as grpc-js hands it over with proto-loader's options. */
export interface AnyResource {
  type_url: string
  value: Uint8Array
}

/** The decoder for RateLimitConfig, read from the schema in `protoDir`. */
export function rateLimitConfigType(protoDir: string): protobuf.Type {
  const root = new protobuf.Root()
  // google/protobuf/struct.proto is built into protobufjs; the rest is resolved in protoDir.
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : `${protoDir}/${target}`)
  root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true })
  return root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig')
}

/**
 * Turns every resource of a response into the rules file it stands for, as upstream turns each
 * into its YAML root: one "file" per resource, named `xds:<name>` in issues, so that the same
 * validation as for YAML applies and its messages point at the resource. JSON is YAML, and
 * pretty-printed it gives the issues line numbers. Throws Error with the reason when a resource is
 * not a RateLimitConfig or does not decode.
 */
export function ruleSourcesOf(resources: readonly AnyResource[], type: protobuf.Type): RuleSource[] {
  return resources.map((resource, i) => {
    if (resource.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
      throw new Error(`resource ${i} has type ${resource.type_url || '(none)'}; only ${RATE_LIMIT_CONFIG_TYPE_URL} is understood`)
    }
    let config: RateLimitConfig
    try {
      const message = type.decode(resource.value)
      config = type.toObject(message, { enums: String, longs: Number, defaults: true, arrays: true }) as RateLimitConfig
    } catch (error) {
      throw new Error(`resource ${i} is not a valid RateLimitConfig: ${(error as Error).message}`)
    }
    const file = `xds:${config.name || config.domain || `resource-${i}`}`
    return { file, text: JSON.stringify(yamlRootOf(config), null, 2) }
  })
}

interface RateLimitConfig {
  name: string
  domain: string
  descriptors: Descriptor[]
}

interface Descriptor {
  key: string
  value: string
  rate_limit?: Policy | null
  descriptors: Descriptor[]
  shadow_mode: boolean
  detailed_metric: boolean
  quota_mode: boolean
  metadata?: StructValue | null
}

interface Policy {
  unit: string
  requests_per_unit: number
  unlimited: boolean
  name: string
  replaces: { name: string }[]
}

function yamlRootOf(config: RateLimitConfig): Record<string, unknown> {
  return { domain: config.domain, descriptors: config.descriptors.map(yamlDescriptorOf) }
}

/** Writes only what is set, so that a default (false, empty) reads as the key being absent, as in YAML. */
function yamlDescriptorOf(descriptor: Descriptor): Record<string, unknown> {
  const out: Record<string, unknown> = { key: descriptor.key }
  if (descriptor.value !== '') out.value = descriptor.value
  if (descriptor.rate_limit) out.rate_limit = yamlPolicyOf(descriptor.rate_limit)
  if (descriptor.descriptors.length > 0) out.descriptors = descriptor.descriptors.map(yamlDescriptorOf)
  if (descriptor.shadow_mode) out.shadow_mode = true
  if (descriptor.detailed_metric) out.detailed_metric = true
  if (descriptor.quota_mode) out.quota_mode = true
  if (descriptor.metadata && Object.keys(descriptor.metadata.fields ?? {}).length > 0) out.metadata = jsonOfStruct(descriptor.metadata)
  return out
}

function yamlPolicyOf(policy: Policy): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  // UNKNOWN is proto3's unset unit: upstream treats it as no unit (required unless unlimited).
  if (policy.unit !== 'UNKNOWN') out.unit = policy.unit.toLowerCase()
  if (policy.unlimited) out.unlimited = true
  else out.requests_per_unit = policy.requests_per_unit
  if (policy.name !== '') out.name = policy.name
  if (policy.replaces.length > 0) out.replaces = policy.replaces.map((replace) => ({ name: replace.name }))
  return out
}

/** google.protobuf.Struct / Value as protobufjs decodes them (one field of the `kind` oneof set). */
interface StructValue {
  fields?: Record<string, ValueOf>
}
interface ValueOf {
  nullValue?: unknown
  numberValue?: number
  stringValue?: string
  boolValue?: boolean
  structValue?: StructValue
  listValue?: { values?: ValueOf[] }
  null_value?: unknown
  number_value?: number
  string_value?: string
  bool_value?: boolean
  struct_value?: StructValue
  list_value?: { values?: ValueOf[] }
}

function jsonOfStruct(struct: StructValue): Record<string, unknown> {
  return Object.fromEntries(Object.entries(struct.fields ?? {}).map(([key, value]) => [key, jsonOfValue(value)]))
}

function jsonOfValue(value: ValueOf): unknown {
  const number = value.number_value ?? value.numberValue
  if (number !== undefined) return number
  const text = value.string_value ?? value.stringValue
  if (text !== undefined) return text
  const flag = value.bool_value ?? value.boolValue
  if (flag !== undefined) return flag
  const struct = value.struct_value ?? value.structValue
  if (struct !== undefined) return jsonOfStruct(struct)
  const list = value.list_value ?? value.listValue
  if (list !== undefined) return (list.values ?? []).map(jsonOfValue)
  return null
}
