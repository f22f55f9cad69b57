// The decision-latency histogram: one label, observed with an array increment, exported as prom-client's Histogram.

import type { Metric, Registry } from 'prom-client'

/**
 * One exposition line's value, as prom-client's registry formats it (labels in this order), with
 * the `exemplar` field prom-client's Histogram gives (none here) so its JSON is the same too.
 */
interface HistogramValue {
  labels: Record<string, string | number>
  value: number
  metricName: string
  exemplar: null | undefined
}

/** One label value's counts: per bucket (not cumulative), then the sum and count of everything observed. */
interface Series {
  readonly label: string
  readonly buckets: Float64Array
  sum: number
  count: number
}

export interface LatencyHistogramOptions<L extends string> {
  name: string
  help: string
  labelName: string
  labelValues: readonly L[]
  /** Upper bounds, ascending; `+Inf` is added. */
  buckets: readonly number[]
  registers: readonly Registry[]
}

/**
 * A Prometheus histogram over one label whose values are known up front (the transports). Each
 * decided request is observed once: prom-client's labelled observe validates and hashes the
 * labels and allocates on every call, where this adds to a typed array. The exposition is the same
 * as prom-client's Histogram: buckets, `_sum` and `_count` for each label value observed at least
 * once, in the order they were first observed.
 */
export class LatencyHistogram<L extends string> {
  readonly name: string
  readonly help: string
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly labelNames: readonly string[]
  readonly #bounds: readonly number[]
  readonly #series: Record<L, Series>
  /** Label values in the order first observed (prom-client's order). */
  readonly #observed: Series[] = []

  constructor(options: LatencyHistogramOptions<L>) {
    this.name = options.name
    this.help = options.help
    this.labelNames = [options.labelName]
    this.#bounds = [...options.buckets]
    this.#series = {} as Record<L, Series>
    for (const label of options.labelValues) {
      this.#series[label] = { label, buckets: new Float64Array(this.#bounds.length), sum: 0, count: 0 }
    }
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric)
  }

  /** Counts one observation, in seconds. */
  observe(label: L, seconds: number): void {
    const series = this.#series[label]
    if (series.count === 0) this.#observed.push(series)
    series.sum += seconds
    series.count++
    const bounds = this.#bounds
    for (let i = 0; i < bounds.length; i++) {
      if (seconds <= bounds[i]) {
        series.buckets[i]++
        return
      }
    }
  }

  /** The series in prom-client's shape; the registry formats them. */
  get(): { name: string; help: string; type: 'histogram'; values: HistogramValue[]; aggregator: 'sum' } {
    const labelName = this.labelNames[0]
    const values: HistogramValue[] = []
    const bucketName = `${this.name}_bucket`
    for (const series of this.#observed) {
      let cumulative = 0
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.buckets[i]
        const labels = { le: this.#bounds[i], [labelName]: series.label }
        values.push({ labels, value: cumulative, metricName: bucketName, exemplar: null })
      }
      const labels = { [labelName]: series.label }
      values.push({ labels: { le: '+Inf', ...labels }, value: series.count, metricName: bucketName, exemplar: null })
      values.push({ labels, value: series.sum, metricName: `${this.name}_sum`, exemplar: undefined })
      values.push({ labels, value: series.count, metricName: `${this.name}_count`, exemplar: undefined })
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' }
  }

  /** Forgets every observation (Registry.resetMetrics). */
  reset(): void {
    for (const series of this.#observed) {
      series.buckets.fill(0)
      series.sum = 0
      series.count = 0
    }
    this.#observed.length = 0
  }
}
