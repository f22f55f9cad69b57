// The decision-latency histogram: a few additions per request on the hot path, read out in prom-client's histogram format when scraped.

import type { Histogram, Registry } from 'prom-client'

/** One label value's counts: per bucket (not cumulative; the last slot is past every bound), their sum and count. */
interface Series {
  readonly label: string
  readonly buckets: Float64Array
  sum: number
  count: number
}

/** One exported sample, as prom-client's registry reads it. */
export interface HistogramValue {
  metricName: string
  labels: Record<string, string | number>
  value: number
}

export interface LatencyHistogramOptions {
  name: string
  help: string
  /** The one label, e.g. `transport`. */
  labelName: string
  /** Upper bounds in ascending order, as for a prom-client Histogram. */
  buckets: readonly number[]
  registry: Registry
}

/**
 * A histogram with one label, exported exactly as a prom-client Histogram with the same name,
 * bounds and observations would be (the test holds it to one). A prom-client `observe` validates
 * and hashes its labels and makes two objects on every call; on the decision path that was about
 * a third of a microsecond per request, here it is a bucket search and three additions.
 */
export class LatencyHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram' as const
  readonly aggregator = 'sum' as const
  readonly #labelName: string
  readonly #bounds: readonly number[]
  readonly #series = new Map<string, Series>()

  constructor(options: LatencyHistogramOptions) {
    this.name = options.name
    this.help = options.help
    this.#labelName = options.labelName
    this.#bounds = [...options.buckets]
    // The registry reads a metric through get() and name/help/type alone; it is typed for its own classes.
    options.registry.registerMetric(this as unknown as Histogram)
  }

  /** The series of one label value, to observe into without a lookup per call. */
  series(label: string): { observe(seconds: number): void } {
    const series = this.#seriesOf(label)
    return { observe: (seconds) => this.#observe(series, seconds) }
  }

  /** What prom-client's Histogram.get() gives: cumulative buckets, `+Inf`, sum and count per observed label value. */
  get(): { name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: HistogramValue[] } {
    const values: HistogramValue[] = []
    const bucketName = `${this.name}_bucket`
    for (const series of this.#series.values()) {
      if (series.count === 0) continue
      const label = this.#labelName
      let cumulative = 0
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.buckets[i]
        values.push({ metricName: bucketName, labels: { le: this.#bounds[i], [label]: series.label }, value: cumulative })
      }
      values.push({ metricName: bucketName, labels: { le: '+Inf', [label]: series.label }, value: series.count })
      values.push({ metricName: `${this.name}_sum`, labels: { [label]: series.label }, value: series.sum })
      values.push({ metricName: `${this.name}_count`, labels: { [label]: series.label }, value: series.count })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  /** Forgets every observation (Registry.resetMetrics calls it). A series with none is not exported, as in prom-client. */
  reset(): void {
    for (const series of this.#series.values()) {
      series.buckets.fill(0)
      series.sum = 0
      series.count = 0
    }
  }

  #seriesOf(label: string): Series {
    let series = this.#series.get(label)
    if (series === undefined) {
      series = { label, buckets: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 }
      this.#series.set(label, series)
    }
    return series
  }

  #observe(series: Series, seconds: number): void {
    const bounds = this.#bounds
    let i = 0
    while (i < bounds.length && seconds > bounds[i]) i++
    series.buckets[i]++
    series.sum += seconds
    series.count++
  }
}
