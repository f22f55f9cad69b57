// docs/grafana/floodgate.json: every query names metrics that a running service's /metrics really exports.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { checkBody, postJson, startTestService, type TestService } from '../service/helpers.js'
import { ServiceMetrics } from '../../src/service/metrics.js'

const DASHBOARD = new URL('../../../../docs/grafana/floodgate.json', import.meta.url)

interface Panel {
  title: string
  type: string
  targets?: { expr: string; refId: string }[]
  datasource?: { uid: string }
}

/** PromQL words that are not metric names: aggregations' and binary operators' keywords. */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool'])

/**
 * The metric names a PromQL expression selects: what is left once strings, label matchers, range
 * selectors, label lists of `by (…)` and friends, function calls, keywords and numbers are removed.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
  const names: string[] = []
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?/g)) {
    if (match[1] !== undefined || KEYWORDS.has(match[0])) continue
    names.push(match[0])
  }
  return names
}

/** The names a Prometheus exposition declares (`# TYPE`), with a histogram's `_bucket`, `_sum` and `_count` series. */
function exported(exposition: string): Set<string> {
  const names = new Set<string>()
  for (const [, name, type] of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name)
    if (type === 'histogram' || type === 'summary') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix)
  }
  return names
}

describe('the Grafana dashboard', () => {
  let service: TestService
  let names: Set<string>
  before(async () => {
    service = await startTestService()
    // A few decisions, allowed and denied, so every per-rule series exists as it would in production.
    for (let i = 0; i < 5; i++) await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'grafana' }]))
    names = exported(await (await fetch(`${service.httpUrl}/metrics`)).text())
    // The region metrics are registered only with --region (which needs Redis regions): the names
    // come from the same ServiceMetrics the server uses, watching regions as it then does.
    const withRegions = new ServiceMetrics({ processMetrics: false })
    withRegions.watchRegions(() => undefined)
    for (const name of exported((await withRegions.expose()).body)) names.add(name)
  })
  after(async () => {
    await service?.stop()
  })

  it('reads PromQL names the way Prometheus does', () => {
    assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, transport) (rate(a_bucket{x="y"}[5m])))'), ['a_bucket'])
    assert.deepEqual(metricNames('sum(rate(a{rule=~"b.c"}[$__rate_interval])) / on (rule) group_left sum(b) or vector(0)'), ['a', 'b'])
  })

  it('names in every query a metric the service exports', () => {
    type Dashboard = { panels: Panel[]; templating: { list: { query: { query: string } }[] } }
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard
    const queries: [string, string][] = []
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) queries.push([`${panel.title} ${target.refId}`, target.expr])
      if (panel.targets !== undefined && panel.targets.length > 0) assert.equal(panel.datasource?.uid, '${DS_PROMETHEUS}', panel.title)
    }
    for (const variable of dashboard.templating.list) {
      queries.push(['variable', variable.query.query.replace(/^label_values\((\w+),.*$/, '$1')])
    }
    assert.ok(queries.length >= 15, `${queries.length} queries`)
    for (const [where, expr] of queries) {
      const used = metricNames(expr)
      assert.ok(used.length > 0, `${where}: ${expr} selects no metric`)
      for (const name of used) assert.ok(names.has(name), `${where}: ${name} is not exported by the service`)
    }
  })

  it('has a panel for each figure the live page shows', () => {
    const text = readFileSync(DASHBOARD, 'utf8')
    const shown = [
      'floodgate_within_limit',
      'floodgate_over_limit',
      'floodgate_breaker_state',
      'floodgate_fallback_decisions_total',
      'floodgate_rules_loaded',
      'floodgate_config_reloads_total',
      'floodgate_store_errors_total',
      'floodgate_write_back_unflushed_units',
      'floodgate_lease_units_held',
      'floodgate_leases_held',
      'floodgate_region_replication_lag_seconds',
      'floodgate_region_peer_last_heard_seconds',
    ]
    for (const metric of shown) {
      assert.ok(text.includes(metric), metric)
    }
    assert.match(text, /sum by \(rule\) \(rate\(floodgate_over_limit/)
  })
})
