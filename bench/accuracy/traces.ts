// Seeded traffic traces: steady, bursty, a client that games the window edge, and a crowd.

import { LIMIT, PERIOD_MS, type RunSize } from './setup.js'

/** One request of a trace: when, and which client sent it. */
export interface Arrival {
  readonly at: number
  readonly client: number
}

export interface Trace {
  readonly name: string
  readonly about: string
  readonly clients: number
  readonly arrivals: Arrival[]
  /** Clients that send faster than the limit (the crowd's few); the others stay below it. */
  readonly overLimit?: ReadonlySet<number>
}

// Mulberry32: a small seeded generator, so every run (and CI) replays the same traces.
export function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Poisson arrivals for one client at `ratePerMs(t)` over [0, durationMs) (thinning against `peakPerMs`). */
export function poisson(
  next: () => number,
  client: number,
  peakPerMs: number,
  ratePerMs: (t: number) => number,
  durationMs: number,
): Arrival[] {
  const out: Arrival[] = []
  for (let t = -Math.log(1 - next()) / peakPerMs; t < durationMs; t += -Math.log(1 - next()) / peakPerMs) {
    if (next() * peakPerMs < ratePerMs(t)) out.push({ at: Math.floor(t), client })
  }
  return out
}

/** Quiet at half the limit's rate, with a burst at 6x for 5-30 s every one to four minutes; `seed` picks the bursts. */
export function burstyArrivals(seed: number, durationMs: number): Arrival[] {
  const rate = LIMIT / PERIOD_MS
  const next = random(seed)
  const bursts: [number, number][] = []
  for (let t = 20_000; t < durationMs; t += 60_000 + next() * 180_000) bursts.push([t, t + 5_000 + next() * 25_000])
  const inBurst = (t: number) => bursts.some(([from, to]) => t >= from && t < to)
  return poisson(next, 0, 6 * rate, (t) => (inBurst(t) ? 6 * rate : 0.5 * rate), durationMs)
}

/** The four traces every algorithm replays. */
export function traces(size: RunSize): Trace[] {
  const { durationMs } = size
  const rate = LIMIT / PERIOD_MS
  const steadyNext = random(1)
  const steady = poisson(steadyNext, 0, 1.2 * rate, () => 1.2 * rate, durationMs)

  const bursty = burstyArrivals(2, durationMs)

  // A client that knows the window: the limit just before each minute ends and again just after.
  const edge: Arrival[] = []
  for (let window = PERIOD_MS; window < durationMs; window += PERIOD_MS) {
    for (let i = 0; i < LIMIT; i++) edge.push({ at: window - 1_000 + i * 10, client: 0 })
    for (let i = 0; i < LIMIT; i++) edge.push({ at: window + i * 10, client: 0 })
  }

  // Many clients, most far below the limit and a few above it: the shape of a public API's traffic.
  const crowdNext = random(3)
  const crowd: Arrival[] = []
  const overLimit = new Set<number>()
  const clients = size.crowdClients
  for (let client = 0; client < clients; client++) {
    const share = crowdNext() < 0.02 ? 1.5 + crowdNext() * 3 : crowdNext() * 0.3
    if (share > 1) overLimit.add(client)
    crowd.push(...poisson(crowdNext, client, share * rate, () => share * rate, durationMs))
  }
  crowd.sort((a, b) => a.at - b.at)

  return [
    { name: 'steady', about: 'one client, Poisson arrivals at 1.2x the limit', clients: 1, arrivals: steady },
    { name: 'bursty', about: 'one client, 0.5x the limit with bursts at 6x for 5-30 s every 1-4 min', clients: 1, arrivals: bursty },
    {
      name: 'window edge',
      about: 'one client sending the limit just before and just after each minute boundary',
      clients: 1,
      arrivals: edge,
    },
    { name: 'crowd', about: `${clients} clients: 98% at 0-0.3x the limit, 2% at 1.5-4.5x`, clients, arrivals: crowd, overLimit },
  ]
}
