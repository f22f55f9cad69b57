// The region settings of `floodgate serve`: --region and --peer, their variables, a regions YAML file, and errors naming the option.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FloodgateError } from 'floodgate'
import { readSettings } from '../../src/service/settings.js'
import { serveUsage } from '../../src/service/serve-help.js'

const REDIS = ['--config', 'r.yaml', '--redis', 'redis://127.0.0.1:7000']

function rejects(args: string[], env: Record<string, string>, message: RegExp): void {
  assert.throws(
    () => readSettings(args, env),
    (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
    `${args.join(' ')} ${JSON.stringify(env)}`,
  )
}

describe('region settings', () => {
  it('are absent unless --region is given', () => {
    assert.equal(readSettings(REDIS, {}).regions, undefined)
  })

  it('come from --region and repeated --peer flags', () => {
    const flags = ['--region', 'eu', '--peer', 'us=redis://us-redis:6379', '--peer', 'ap=rediss://ap:6380', '--region-interval', '50ms']
    const settings = readSettings([...REDIS, ...flags], {})
    assert.deepEqual(settings.regions, { region: 'eu', peers: { us: 'redis://us-redis:6379', ap: 'rediss://ap:6380' }, intervalMs: 50 })
    for (const flag of ['--region', '--peer', '--region-interval', '--regions-file']) assert.ok(serveUsage().includes(flag), flag)
  })

  it('come from the environment, peers as a comma-separated list', () => {
    const settings = readSettings(REDIS, { FLOODGATE_REGION: 'us', FLOODGATE_PEERS: 'eu=redis://eu:6379, ap=redis://ap:6379' })
    assert.deepEqual(settings.regions, { region: 'us', peers: { eu: 'redis://eu:6379', ap: 'redis://ap:6379' }, intervalMs: 100 })
  })

  it('come from a YAML file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-regions-'))
    try {
      const file = join(dir, 'regions.yaml')
      writeFileSync(file, 'region: ap\ninterval: 200ms\npeers:\n  eu: redis://eu:6379\n  us: redis://us:6379\n')
      const expected = { region: 'ap', peers: { eu: 'redis://eu:6379', us: 'redis://us:6379' }, intervalMs: 200 }
      assert.deepEqual(readSettings([...REDIS, '--regions-file', file], {}).regions, expected)
      writeFileSync(file, 'region: ap\npeers:\n  eu: http://eu\n')
      rejects([...REDIS, '--regions-file', file], {}, /regions\.yaml: peers\.eu: expected a redis:\/\/ or rediss:\/\/ URL/)
      writeFileSync(file, 'region: ap\npeers: { ap: redis://x:1 }\n')
      rejects([...REDIS, '--regions-file', file], {}, /peers\.ap: is this region itself/)
      writeFileSync(file, 'region: ap\npeers: {}\nintervall: 1s\n')
      rejects([...REDIS, '--regions-file', file], {}, /intervall/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuse what cannot work, naming the flag and the variable', () => {
    rejects([...REDIS, '--peer', 'us=redis://x:1'], {}, /--region \/ FLOODGATE_REGION: required with --peer/)
    rejects([...REDIS, '--region', 'eu', '--peer', 'us'], {}, /--peer \/ FLOODGATE_PEERS: expected NAME=redis:\/\/host:port/)
    const twice = ['--region', 'eu', '--peer', 'us=redis://a:1', '--peer', 'us=redis://b:1']
    rejects([...REDIS, ...twice], {}, /--peer \/ FLOODGATE_PEERS: peer us is given twice/)
    rejects([...REDIS, '--region', 'eu', '--peer', 'eu=redis://a:1'], {}, /peer eu is this region itself/)
    rejects([...REDIS, '--region', 'e u'], {}, /--region \/ FLOODGATE_REGION: expected a region name/)
    rejects(['--config', 'r.yaml', '--region', 'eu'], {}, /--region \/ FLOODGATE_REGION: regions keep their usage in Redis/)
    rejects([...REDIS, '--region', 'eu', '--regions-file', 'x.yaml'], {}, /give either --regions-file or --region/)
  })
})
