// Starts the service with a gRPC TLS pair that does not match, and leaves the process to end by itself:
// it must, once startService has rejected and closed what it had opened (the rules watcher, the store).

import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { startService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { TEST_RULES } from './helpers.js'
import { makeCa, makeLeaf } from './tls-certs.js'

const dir = mkdtempSync(join(tmpdir(), 'floodgate-start-failure-'))
const rulesFile = join(dir, 'rules.yaml')
writeFileSync(rulesFile, TEST_RULES)
const ca = makeCa(dir, 'ca')
const first = makeLeaf(dir, 'first', ca, 'first', ['DNS:localhost'], 'serverAuth')
const second = makeLeaf(dir, 'second', ca, 'second', ['DNS:localhost'], 'serverAuth')
const settings = readSettings(
  ['--config', rulesFile, '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0'].concat([
    '--grpc-tls',
    '--grpc-tls-cert',
    first.cert,
    '--grpc-tls-key',
    second.key,
  ]),
  {},
)
startService(settings, { logger: pino({ level: 'silent' }) }).then(
  () => process.stdout.write('started\n'),
  (error: Error) => process.stdout.write(`rejected: ${error.message}\n`),
)
