// Starts what --statsd and --tracing ask for (each loads its packages only then), and stops both.

import type { Logger } from 'pino'
import type { Settings } from './settings-types.js'
import { StatsdExport } from './statsd.js'
import { startTracing, type Tracing } from './tracing.js'

/** The service's statsd export and tracing; each undefined when off. */
export interface Telemetry {
  readonly statsd: StatsdExport | undefined
  readonly tracing: Tracing | undefined
  /** Sends what is pending (counters, buffered spans) and stops. */
  close(): Promise<void>
}

export async function startTelemetry(settings: Settings, logger: Logger): Promise<Telemetry> {
  const statsd = settings.statsd === undefined ? undefined : await StatsdExport.start(settings.statsd, logger)
  let tracing: Tracing | undefined
  try {
    tracing = settings.tracing === undefined ? undefined : await startTracing(settings.tracing, settings.store.kind, logger)
  } catch (error) {
    await statsd?.close()
    throw error
  }
  return {
    statsd,
    tracing,
    async close() {
      await statsd?.close()
      // A receiver that is down must not hold shutdown: the exporter's own timeout bounds this.
      await tracing?.close().catch((error: unknown) => logger.warn({ err: error }, 'tracing: exporting the last spans failed'))
    },
  }
}
