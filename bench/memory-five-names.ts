// The five-in-one group's row names, apart from its code: bench/report.ts reads them without loading
// the bench (whose options module parses bench:memory's command line when imported).

export const FIVE_PREFIX = '5-in-1 '
export const FIVE_RLF = `${FIVE_PREFIX}rate-limiter-flexible RateLimiterMemory`
export const FIVE_FLOOR = `${FIVE_PREFIX}floor: Map + Date.now + decision object (async)`
export const FIVE_SYNC_FLOOR = `${FIVE_PREFIX}sync floor: Map + Date.now + decision object`
