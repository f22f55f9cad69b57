// The dashboard page: HTML, CSS and the browser script that reads data.json and draws it with uPlot (served locally, no CDN).

/**
 * The HTML shell, served at the dashboard's path with a trailing slash. Every asset comes from the
 * dashboard's own routes by relative URL, so any mount path (or a proxy's prefix) works.
 */
export function pageHtml(title: string): string {
  const text = escapeHtml(title)
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${text}</title>
<link rel="stylesheet" href="uplot.css">
<link rel="stylesheet" href="app.css">
</head>
<body>
<header><h1>${text}</h1><span id="status">loading…</span></header>
<main>
<section class="totals">
  <div><span class="label">allowed (total)</span><span id="total-allowed" class="figure allowed">–</span></div>
  <div><span class="label">denied (total)</span><span id="total-denied" class="figure denied">–</span></div>
  <div><span class="label">allowed/s (10 s)</span><span id="rate-allowed" class="figure">–</span></div>
  <div><span class="label">denied/s (10 s)</span><span id="rate-denied" class="figure">–</span></div>
</section>
<section class="panel wide"><h2>Decisions per second</h2><div id="chart-decisions" class="chart"></div></section>
<section class="panel"><h2>Allowed per second, per rule</h2><div id="chart-rules-allowed" class="chart"></div></section>
<section class="panel"><h2>Denied per second, per rule</h2><div id="chart-rules-denied" class="chart"></div></section>
<section class="panel"><h2>Store</h2><dl id="store"></dl>
  <div id="chart-latency" class="chart"></div><p id="latency-note" class="note"></p></section>
<section class="panel"><h2>Top limited keys</h2><p id="top-keys-note" class="note"></p>
  <table id="top-keys"><thead><tr><th>key</th><th>denied</th><th>± error</th></tr></thead><tbody></tbody></table></section>
<section class="panel"><h2>Rules</h2><dl id="config"></dl>
  <table id="rules"><thead><tr><th>rule</th><th>allowed/s</th><th>denied/s</th><th>allowed</th><th>denied</th></tr></thead>
  <tbody></tbody></table></section>
<section class="panel" id="sync-panel" hidden><h2>Lease, write-back and regions</h2><dl id="sync"></dl>
  <table id="peers" hidden><thead><tr><th>peer region</th><th>up</th><th>lag</th><th>last heard</th><th>failures</th></tr></thead>
  <tbody></tbody></table></section>
</main>
<script src="uplot.js"></script>
<script src="app.js"></script>
</body>
</html>
`
}

/** The page's own style. */
export const PAGE_CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2430; }
header { display: flex; align-items: baseline; gap: 1em; padding: 0.6em 1.2em; background: #1d2430; color: #fff; }
h1 { font-size: 1.2em; margin: 0; } h2 { font-size: 1em; margin: 0 0 0.5em; }
#status { font-size: 0.85em; opacity: 0.8; } #status.error { color: #ff9b9b; opacity: 1; }
main { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; padding: 12px; }
.panel, .totals { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: 10px 12px; }
.wide, .totals { grid-column: 1 / -1; }
.totals { display: flex; gap: 3em; } .totals div { display: flex; flex-direction: column; }
.label { font-size: 0.8em; color: #5b6472; } .figure { font-size: 1.6em; font-variant-numeric: tabular-nums; }
.allowed { color: #1a7f37; } .denied { color: #cf222e; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 2px 6px; border-bottom: 1px solid #eef0f3; }
td:not(:first-child), th:not(:first-child) { text-align: right; }
td:first-child { font-family: ui-monospace, monospace; word-break: break-all; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0 0 8px; } dt { color: #5b6472; } dd { margin: 0; }
.note { color: #5b6472; font-size: 0.85em; margin: 0 0 6px; } .bad { color: #cf222e; font-weight: 600; }
`

/**
 * The browser script: asks data.json every `refreshMs` (a new request only once the last one is
 * answered) and redraws. `window.floodgateDashboard.refresh()` fetches and draws at once and
 * resolves with the snapshot drawn; with `?refresh=manual` the page never refreshes by itself, so a
 * test (or a screenshot) drives it without racing its timer.
 */
export const PAGE_SCRIPT = `'use strict'
;(function () {
  var COLORS = ['#0969da', '#8250df', '#bf8700', '#1b7c83', '#e16f24', '#6e7781', '#bc4c00', '#4d2d00', '#0550ae']
  var charts = {}
  var state = { last: null, refreshes: 0, timer: null }
  var $ = function (id) { return document.getElementById(id) }
  var fmt = function (n) { return n == null ? '–' : Math.round(n).toLocaleString('en-US') }
  var fmtRate = function (n) { return n < 10 ? n.toFixed(1) : fmt(n) }

  function chart(id, title, names, colors, data, yLabel) {
    var el = $(id)
    var signature = names.join('\\u0000')
    var existing = charts[id]
    if (typeof uPlot === 'undefined') { el.textContent = 'chart library not available (install the uplot package)'; return }
    if (existing && existing.signature === signature) { existing.plot.setData(data); return }
    if (existing) existing.plot.destroy()
    var series = [{}].concat(names.map(function (name, i) {
      return { label: name, stroke: colors[i % colors.length], width: 1.5, spanGaps: false }
    }))
    // Times of day only (uPlot's default adds the date on a second line, which crowds narrow charts).
    var clock = function (u, ticks) {
      return ticks.map(function (t) { return new Date(t * 1000).toLocaleTimeString([], { hour12: false }) })
    }
    var opts = { width: Math.max(300, el.clientWidth || 440), height: 200, series: series,
      axes: [{ values: clock, space: 80 }, { label: yLabel, size: 60 }],
      scales: { x: { time: true } }, legend: { live: false } }
    charts[id] = { signature: signature, plot: new uPlot(opts, data, el) }
  }

  function row(cells) {
    var tr = document.createElement('tr')
    cells.forEach(function (cell) { var td = document.createElement('td'); td.textContent = cell; tr.appendChild(td) })
    return tr
  }
  function fill(tbody, rows) { tbody.replaceChildren.apply(tbody, rows) }
  function pairs(dl, entries) {
    var nodes = []
    entries.forEach(function (entry) {
      var dt = document.createElement('dt'); dt.textContent = entry[0]
      var dd = document.createElement('dd'); dd.textContent = entry[1]; if (entry[2]) dd.className = entry[2]
      nodes.push(dt, dd)
    })
    dl.replaceChildren.apply(dl, nodes)
  }
  function recent(values) { var s = 0; values.slice(-10).forEach(function (v) { s += v }); return s / 10 }

  function draw(d) {
    var s = d.series
    $('total-allowed').textContent = fmt(d.totals.allowed)
    $('total-denied').textContent = fmt(d.totals.denied)
    $('rate-allowed').textContent = fmtRate(recent(s.allowed))
    $('rate-denied').textContent = fmtRate(recent(s.denied))
    chart('chart-decisions', 'decisions', ['allowed', 'denied', 'fallback'], ['#1a7f37', '#cf222e', '#bf8700'],
      [s.time, s.allowed, s.denied, s.fallback], 'per second')
    var charted = d.rules.filter(function (r) { return r.series })
    var names = charted.map(function (r) { return r.rule })
    var allowedByRule = charted.map(function (r) { return r.series.allowed })
    var deniedByRule = charted.map(function (r) { return r.series.denied })
    chart('chart-rules-allowed', 'allowed', names, COLORS, [s.time].concat(allowedByRule), 'per second')
    chart('chart-rules-denied', 'denied', names, COLORS, [s.time].concat(deniedByRule), 'per second')

    var st = d.store
    var latency = st.latency
    pairs($('store'), [
      ['kind', st.kind], ['circuit breaker', st.breaker, st.breaker === 'open' ? 'bad' : ''],
      ['errors', fmt(st.errors)],
      ['fallback decisions',
        'open ' + fmt(st.fallbacks.open) + ' · closed ' + fmt(st.fallbacks.closed) + ' · local ' + fmt(st.fallbacks.local)],
      ['latency p50 / p99', latency ? (latency.p50Ms == null ? 'no calls in the last 10 s'
        : '≤ ' + latency.p50Ms.toFixed(3) + ' ms / ≤ ' + latency.p99Ms.toFixed(3) + ' ms (' + fmt(latency.samples) + ' calls, 10 s)')
        : 'in-process store: no I/O']
    ])
    if (latency) {
      $('latency-note').textContent = 'store call latency per second (ms, bucket upper bounds)'
      chart('chart-latency', 'latency', ['p50', 'p99'], ['#0969da', '#8250df'], [s.time, s.storeLatencyP50Ms, s.storeLatencyP99Ms], 'ms')
    } else {
      $('latency-note').textContent = 'The embedded store decides in-process: there is no store latency to chart.'
    }

    var tk = d.topKeys
    $('top-keys-note').textContent = 'Most denied keys, last ' + Math.round(tk.spanMs / 60000) + ' min (Space-Saving estimates, ' +
      tk.capacity + ' counters per ' + Math.round(tk.windowMs / 1000) + ' s window); ' +
      (tk.hashed ? 'keys shown as SHA-256 prefixes.' : 'raw keys.')
    fill($('top-keys').tBodies[0], tk.keys.map(function (k) { return row([k.key, fmt(k.denied), fmt(k.error)]) }))

    var c = d.config
    pairs($('config'), c ? [
      ['rules loaded', String(c.rules)], ['files', c.files.join(', ') || '–'],
      ['last reload', c.lastReloadError ? 'failed: ' + c.lastReloadError.join('; ') : 'ok', c.lastReloadError ? 'bad' : '']
    ] : [['rules', 'not reported']])
    fill($('rules').tBodies[0], d.rules.map(function (r) {
      return row([r.rule, fmtRate(r.allowedPerSecond), fmtRate(r.deniedPerSecond), fmt(r.allowed), fmt(r.denied)])
    }))

    $('sync-panel').hidden = d.sync === null
    if (d.sync) drawSync(d.sync)
  }

  function ms(n) { return n == null ? '–' : n < 1000 ? fmt(n) + ' ms' : (n / 1000).toFixed(1) + ' s' }
  function drawSync(sy) {
    var entries = []
    var wb = sy.writeBack
    if (wb) {
      entries.push(['write-back keys', fmt(wb.keys)], ['unflushed units', fmt(wb.unflushed)],
        ['store calls', fmt(wb.calls) + ' (' + fmt(wb.failedCalls) + ' failed)', wb.failedCalls > 0 ? 'bad' : ''],
        ['replays · refused keys', fmt(wb.replays) + ' · ' + fmt(wb.refused), wb.refused > 0 ? 'bad' : ''])
    }
    var ls = sy.leases
    if (ls) {
      entries.push(['leases held', fmt(ls.leases) + ' (' + fmt(ls.keys) + ' keys followed)'], ['units held', fmt(ls.units)],
        ['leases acquired · returned', fmt(ls.acquired) + ' · ' + fmt(ls.returned)],
        ['auto keys on leases', fmt(ls.autoOnLeases) + ' of ' + fmt(ls.autoKeys)])
    }
    var rg = sy.regions
    if (rg) {
      entries.push(['region', rg.region], ['degraded peers', rg.degraded.join(', ') || 'none', rg.degraded.length ? 'bad' : ''],
        ['units given · claimed · lost', fmt(rg.unitsGiven) + ' · ' + fmt(rg.unitsClaimed) + ' · ' + fmt(rg.lost)])
    }
    pairs($('sync'), entries)
    $('peers').hidden = !rg
    fill($('peers').tBodies[0], rg ? rg.peers.map(function (p) {
      var heard = p.lastHeardMsAgo == null ? 'never' : ms(p.lastHeardMsAgo) + ' ago'
      return row([p.name, p.up ? 'yes' : 'no', ms(p.lagMs), heard, fmt(p.failures)])
    }) : [])
  }

  function refresh() {
    return fetch('data.json', { cache: 'no-store', credentials: 'same-origin' }).then(function (response) {
      if (!response.ok) throw new Error('data.json answered ' + response.status)
      return response.json()
    }).then(function (d) {
      state.last = d
      draw(d)
      state.refreshes++
      var status = $('status'); status.className = ''
      var every = manual ? ' · manual refresh' : ' · every ' + d.refreshMs / 1000 + ' s'
      status.textContent = 'updated ' + new Date(d.now).toLocaleTimeString() + every
      document.body.dataset.refreshes = String(state.refreshes)
      return d
    }, function (error) {
      var status = $('status'); status.className = 'error'; status.textContent = String(error.message || error)
      throw error
    })
  }
  function loop() {
    refresh().catch(function () {}).then(function () {
      var every = state.last ? state.last.refreshMs : 2000
      state.timer = setTimeout(loop, every)
    })
  }
  var manual = /[?&]refresh=manual(&|$)/.test(location.search)
  window.floodgateDashboard = { refresh: refresh, state: state }
  if (manual) refresh().catch(function () {})
  else loop()
})()
`

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
