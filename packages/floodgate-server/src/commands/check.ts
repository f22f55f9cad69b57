// `floodgate check`: ask a running service to decide one descriptor, and exit by its answer.

import { parseArgs } from 'node:util'
import { FloodgateError } from 'floodgate'
import { type CheckResult, type DescriptorEntry, FloodgateClient } from 'floodgate/client'
import { wantsHelp } from './args.js'

const CHECK_USAGE = `Usage: floodgate check --url <http://host:port> --domain <domain> key=value [key=value…] [options]

Asks a running service to decide one descriptor (its entries as key=value, in order).
  --url <url>        the service's HTTP address (required)
  --domain <domain>  the rules domain (required)
  --hits <n>         units to charge (default 1; 0 checks without counting)
  --timeout <ms>     longest wait for the answer (default 2s)
  --json             print the answer as JSON
Exit status: 0 allowed, 1 limited, 2 error.`

export async function check(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(`${CHECK_USAGE}\n`)
    return 0
  }
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      domain: { type: 'string' },
      hits: { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
    },
  })
  if (values.url === undefined) throw new FloodgateError('INVALID_OPTION', 'check: --url is required, e.g. --url http://127.0.0.1:8080')
  if (values.domain === undefined) throw new FloodgateError('INVALID_OPTION', 'check: --domain is required, e.g. --domain edge')
  if (positionals.length === 0) throw new FloodgateError('INVALID_OPTION', 'check: give at least one key=value entry, e.g. user=alice')
  const entries = positionals.map(toEntry)
  const hits = values.hits === undefined ? 1 : Number(values.hits)
  if (!Number.isInteger(hits) || hits < 0)
    throw new FloodgateError('INVALID_OPTION', `check: --hits must be a whole number ≥ 0, got ${values.hits}`)
  const client = new FloodgateClient({
    url: values.url,
    timeout: (values.timeout as `${number}ms` | undefined) ?? '2s',
    failOpen: false,
    warm: false,
  })
  const result = await client.check({ domain: values.domain, descriptors: [entries], hits })
  client.close()
  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : describeResult(result))
  if (result.error !== undefined) return 2
  return result.allowed ? 0 : 1
}

function toEntry(text: string): DescriptorEntry {
  const at = text.indexOf('=')
  if (at <= 0) throw new FloodgateError('INVALID_OPTION', `check: expected key=value, got ${JSON.stringify(text)}`)
  return { key: text.slice(0, at), value: text.slice(at + 1) }
}

function describeResult(result: CheckResult): string {
  if (result.error !== undefined) return `error: ${result.error}\n`
  const lines = [result.allowed ? 'allowed' : `limited (retry after ${Math.ceil(result.retryAfterMs / 1000)}s)`]
  for (const r of result.results) {
    if (r.rule === null) lines.push('  no rule matches: allowed')
    else if ('unlimited' in r) lines.push(`  rule ${r.rule}: unlimited`)
    else if ('replaced' in r) lines.push(`  rule ${r.rule}: replaced by another descriptor's rule (replaces:), not applied`)
    else {
      const state = r.allowed ? (r.wouldDeny ? 'allowed (shadow mode, would deny)' : 'allowed') : 'denied'
      lines.push(
        `  rule ${r.rule}, policy ${r.policy}: ${state}, ${r.remaining}/${r.limit} remaining, resets in ${Math.ceil(r.resetMs / 1000)}s`,
      )
    }
  }
  return `${lines.join('\n')}\n`
}
