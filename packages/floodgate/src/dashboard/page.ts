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
<link rel="icon" href="${FAVICON}">
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

// Inline, so the browser's favicon request is answered without a route (and logs no 404). The CSP allows data: images.
const FAVICON =
  "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E" +
  "%3Crect width='16' height='16' rx='3' fill='%231d2430'/%3E" +
  "%3Cpath d='M3 4v8M8 4v8M13 4v8' stroke='%2354aeff' stroke-width='2'/%3E%3C/svg%3E"

/** The page's own style. */
export const PAGE_CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2430; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0 1em; padding: 0.6em 1.2em; background: #1d2430; color: #fff; }
h1 { font-size: 1.2em; margin: 0; } h2 { font-size: 1em; margin: 0 0 0.5em; }
#status { font-size: 0.85em; opacity: 0.8; } #status.error { color: #ff9b9b; opacity: 1; }
main { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(460px, 100%), 1fr)); gap: 12px; padding: 12px; }
.panel, .totals { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: 10px 12px; min-width: 0; }
.wide, .totals { grid-column: 1 / -1; }
.totals { display: flex; flex-wrap: wrap; gap: 0.5em 3em; } .totals div { display: flex; flex-direction: column; }
.label { font-size: 0.8em; color: #5b6472; } .figure { font-size: 1.6em; font-variant-numeric: tabular-nums; }
.allowed { color: #1a7f37; } .denied { color: #cf222e; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 2px 4px; border-bottom: 1px solid #eef0f3; }
td:not(:first-child), th:not(:first-child) { text-align: right; }
td:first-child { font-family: ui-monospace, monospace; overflow-wrap: anywhere; min-width: 6em; }
td:not(:first-child) { white-space: nowrap; } th { font-size: 0.85em; font-weight: 600; }
td.note { font-family: inherit; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0 0 8px; } dt { color: #5b6472; }
dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
.chart { position: relative; min-height: 200px; }
.empty { position: absolute; left: 50%; top: 80px; transform: translateX(-50%); margin: 0; padding: 2px 8px;
  background: #fff; border-radius: 4px; color: #5b6472; white-space: nowrap; pointer-events: none; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.4em; vertical-align: -0.05em; }
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
  // Rule colours: blues, purples and greys, apart from each other and in hue from the decision
  // chart's allowed green, denied red and fallback amber, so that no rule line reads as one of those.
  var PALETTE = ['#0969da', '#8250df', '#bf3989', '#0a3069', '#54aeff', '#1b7c83', '#6e7781']
  var DECISION_COLORS = { allowed: '#1a7f37', denied: '#cf222e', fallback: '#bf8700' }
  // A rule keeps its colour for the life of the page, whatever its rank: it starts at the slot its
  // name hashes to (so a reload usually gives it the same one) and takes the next free slot on a clash.
  var slotOf = {}
  var taken = []
  function colorOf(rule) {
    if (slotOf[rule] === undefined) {
      var h = 2166136261
      for (var i = 0; i < rule.length; i++) h = Math.imul(h ^ rule.charCodeAt(i), 16777619) >>> 0
      var slot = h % PALETTE.length
      for (var n = 0; n < PALETTE.length && taken[slot] !== undefined; n++) slot = (slot + 1) % PALETTE.length
      // More rules than colours over the page's life: the latecomer shares its hashed slot.
      if (taken[slot] !== undefined) slot = h % PALETTE.length
      else taken[slot] = rule
      slotOf[rule] = slot
    }
    return PALETTE[slotOf[rule]]
  }
  var charts = {}
  var state = { last: null, refreshes: 0, timer: null }
  var $ = function (id) { return document.getElementById(id) }
  var fmt = function (n) { return n == null ? '–' : Math.round(n).toLocaleString('en-US') }
  var fmtRate = function (n) { return n < 10 ? n.toFixed(1) : fmt(n) }

  // Nothing but zeros and gaps in every line: the chart says so instead of showing a bare frame.
  function hasData(data) {
    for (var i = 1; i < data.length; i++) for (var j = 0; j < data[i].length; j++) if (data[i][j]) return true
    return false
  }
  function emptyNote(el, text) {
    var note = el.querySelector('.empty')
    if (!text) { if (note) note.remove(); return }
    if (!note) { note = document.createElement('p'); note.className = 'empty'; el.appendChild(note) }
    note.textContent = text
  }
  function chart(id, title, names, colors, data, yLabel, emptyText) {
    var el = $(id)
    var signature = names.join('\\u0000')
    var existing = charts[id]
    if (typeof uPlot === 'undefined') { el.textContent = 'chart library not available (install the uplot package)'; return }
    emptyNote(el, hasData(data) ? '' : emptyText || 'no data yet')
    if (existing && existing.signature === signature) { existing.plot.setData(data); return }
    if (existing) existing.plot.destroy()
    var series = [{}].concat(names.map(function (name, i) {
      return { label: name, stroke: colors[i % colors.length], width: 1.5, spanGaps: false }
    }))
    // Times of day only (uPlot's default adds the date on a second line, which crowds narrow charts).
    var clock = function (u, ticks) {
      return ticks.map(function (t) { return new Date(t * 1000).toLocaleTimeString([], { hour12: false }) })
    }
    var opts = { width: chartWidth(el), height: 200, series: series,
      axes: [{ values: clock, space: 80 }, { label: yLabel, size: 60 }],
      scales: { x: { time: true } }, legend: { live: false } }
    charts[id] = { signature: signature, plot: new uPlot(opts, data, el), el: el }
  }
  // The panel's width, so a chart never pushes the page wider than a phone's screen.
  function chartWidth(el) { return Math.max(160, el.clientWidth || 440) }
  var resizing = null
  window.addEventListener('resize', function () {
    clearTimeout(resizing)
    resizing = setTimeout(function () {
      Object.keys(charts).forEach(function (id) { charts[id].plot.setSize({ width: chartWidth(charts[id].el), height: 200 }) })
    }, 100)
  })

  function row(cells) {
    var tr = document.createElement('tr')
    cells.forEach(function (cell) { var td = document.createElement('td'); td.textContent = cell; tr.appendChild(td) })
    return tr
  }
  function emptyRow(columns, text) {
    var tr = document.createElement('tr'); var td = document.createElement('td')
    td.colSpan = columns; td.className = 'note'; td.textContent = text; tr.appendChild(td)
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
    chart('chart-decisions', 'decisions', ['allowed', 'denied', 'fallback'],
      [DECISION_COLORS.allowed, DECISION_COLORS.denied, DECISION_COLORS.fallback],
      [s.time, s.allowed, s.denied, s.fallback], 'per second', 'no decisions yet')
    // In name order, not rank order: the legend keeps its order and the chart is rebuilt only when
    // the set of charted rules changes.
    var charted = d.rules.filter(function (r) { return r.series })
      .sort(function (a, b) { return a.rule < b.rule ? -1 : a.rule > b.rule ? 1 : 0 })
    var names = charted.map(function (r) { return r.rule })
    var colors = names.map(colorOf)
    var allowedByRule = charted.map(function (r) { return r.series.allowed })
    var deniedByRule = charted.map(function (r) { return r.series.denied })
    chart('chart-rules-allowed', 'allowed', names, colors, [s.time].concat(allowedByRule), 'per second', 'no rule has allowed anything yet')
    chart('chart-rules-denied', 'denied', names, colors, [s.time].concat(deniedByRule), 'per second', 'no rule has denied anything yet')

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
    $('chart-latency').hidden = !latency
    if (latency) {
      $('latency-note').textContent = 'store call latency per second (ms, bucket upper bounds)'
      chart('chart-latency', 'latency', ['p50', 'p99'], ['#0969da', '#8250df'], [s.time, s.storeLatencyP50Ms, s.storeLatencyP99Ms], 'ms',
        'no store calls yet')
    } else {
      $('latency-note').textContent = 'The embedded store decides in-process: there is no store latency to chart.'
    }

    var tk = d.topKeys
    $('top-keys-note').textContent = 'Most denied keys, last ' + Math.round(tk.spanMs / 60000) + ' min (Space-Saving estimates, ' +
      tk.capacity + ' counters per ' + Math.round(tk.windowMs / 1000) + ' s window); ' +
      (tk.hashed ? 'keys shown as SHA-256 prefixes.' : 'raw keys.')
    fill($('top-keys').tBodies[0], tk.keys.length ? tk.keys.map(function (k) { return row([k.key, fmt(k.denied), fmt(k.error)]) })
      : [emptyRow(3, 'no key denied yet')])

    var c = d.config
    pairs($('config'), c ? [
      ['rules loaded', String(c.rules)], ['files', c.files.join(', ') || '–'],
      ['last reload', c.lastReloadError ? 'failed: ' + c.lastReloadError.join('; ') : 'ok', c.lastReloadError ? 'bad' : '']
    ] : [['rules', 'not reported']])
    fill($('rules').tBodies[0], d.rules.length ? d.rules.map(function (r) {
      var tr = row([r.rule, fmtRate(r.allowedPerSecond), fmtRate(r.deniedPerSecond), fmt(r.allowed), fmt(r.denied)])
      tr.dataset.rule = r.rule
      // The rules charted now carry their line's colour.
      if (r.series) {
        var swatch = document.createElement('span'); swatch.className = 'swatch'; swatch.style.background = colorOf(r.rule)
        tr.firstChild.prepend(swatch)
      }
      return tr
    }) : [emptyRow(5, 'no rules loaded')])

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
  window.floodgateDashboard = { refresh: refresh, state: state, colorOf: colorOf, palette: PALETTE, decisionColors: DECISION_COLORS }
  if (manual) refresh().catch(function () {})
  else loop()
})()
`

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
