// A short visible demo of the library on the embedded store: `npm run demo`.

import { RateLimiter, MemoryStore, type Decision } from '../packages/floodgate/src/index.js'

function line(label: string, d: Decision): string {
  const verdict = d.allowed ? 'allowed' : `denied, retry in ${d.retryAfterMs}ms`
  const flags = [d.over && 'over', d.shadow && 'shadow', d.source !== 'store' && d.source].filter(Boolean).join(', ')
  const numbers = `policy=${d.policy} limit=${d.limit} remaining=${d.remaining}`
  return `${label.padEnd(12)} ${verdict.padEnd(26)} ${numbers}${flags ? ` (${flags})` : ''}`
}

async function main(): Promise<void> {
  const limiter = new RateLimiter({
    store: new MemoryStore({ maxKeys: 100_000 }),
    policies: [
      { name: 'burst', algorithm: 'gcra', limit: 5, period: '1s' },
      { name: 'hourly', algorithm: 'sliding-window', limit: 500, period: '1h' },
      { name: 'trial', algorithm: 'fixed-window', limit: 3, period: '1m', shadow: true },
    ],
  })
  console.log('user:42 sends 7 requests at once (burst 5 per second, 500 per hour, a shadow trial of 3 per minute):')
  for (let i = 1; i <= 7; i++) console.log(line(`request ${i}`, await limiter.limit('user:42')))
  console.log(line('peek', await limiter.get('user:42')))
  await limiter.refund('user:42', 1)
  console.log(line('after refund', await limiter.limit('user:42')))

  const soft = new RateLimiter({
    policies: [{ name: 'soft', algorithm: 'fixed-window', limit: 4, period: '1m', mode: 'soft', overage: 0.5 }],
  })
  console.log('\nsoft mode, limit 4 with 50% overage:')
  for (let i = 1; i <= 7; i++) console.log(line(`request ${i}`, await soft.limit('user:7')))
  await Promise.all([limiter.close(), soft.close()])
}

await main()
