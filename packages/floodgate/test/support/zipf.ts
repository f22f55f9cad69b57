// A Zipf trace: the ranks of keys asked for, shared by the auto heat test and bench/auto.ts.

/**
 * 2^20 ranks (0 = hottest) drawn from Zipf(s) over n keys by its inverse CDF, with a fixed seed:
 * the same trace on every run, replayed in order (index with `i & (length - 1)`).
 */
export function zipfRanks(n: number, s: number): Int32Array {
  const cdf = new Float64Array(n)
  let sum = 0
  for (let r = 0; r < n; r++) cdf[r] = sum += 1 / (r + 1) ** s
  const ranks = new Int32Array(1 << 20)
  let seed = 0x2545f491
  for (let i = 0; i < ranks.length; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    const u = (seed / 2 ** 32) * sum
    let lo = 0
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid] < u) lo = mid + 1
      else hi = mid
    }
    ranks[i] = lo
  }
  return ranks
}
