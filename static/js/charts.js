// Plotly charts of the memory and audit pages; the data comes from the server, rendered as is.
(function () {
  if (typeof Plotly === "undefined") { return; }
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var font = { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12, color: "#1c2330" };

  // A time axis proportional to time with ticks a person reads: at least a minute wide (a few
  // entries signed in the same second would otherwise be ticked in fractions of a millisecond).
  function weightAxis(times) {
    var ms = times.map(function (t) { return Date.parse(t.replace(" ", "T") + "Z"); }).filter(isFinite);
    var lo = Math.min.apply(null, ms), hi = Math.max.apply(null, ms);
    var pad = Math.max(30000, (hi - lo) * 0.05);
    var iso = function (v) { return new Date(v).toISOString().replace("T", " ").replace("Z", ""); };
    var span = hi - lo + 2 * pad;
    return { type: "date", gridcolor: "#eef0f4", nticks: 6, range: [iso(lo - pad), iso(hi + pad)],
             tickformat: span < 3 * 3600e3 ? "%H:%M:%S<br>%b %d" : span < 3 * 86400e3 ? "%H:%M<br>%b %d" : "%b %d<br>%Y" };
  }
  // Weight timeline: one point per signed weight entry (genesis, then each transition).
  var wc = document.getElementById("weight-chart");
  if (wc) {
    var w = JSON.parse(wc.getAttribute("data-weights"));
    Plotly.newPlot(wc, [{
      x: w.t, y: w.w, customdata: w.seq, type: "scatter", mode: "lines+markers", line: { shape: "hv", color: "#3b4cca", width: 2 },
      marker: { size: 8 }, hovertemplate: "seq %{customdata}<br>%{x}<br>weight %{y:.3f}<extra></extra>"
    }], {
      margin: { l: 48, r: 16, t: 8, b: 40 }, font: font, yaxis: { title: { text: "weight" }, rangemode: "tozero", gridcolor: "#eef0f4" },
      xaxis: weightAxis(w.t), paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", showlegend: false
    }, config);
  }

  // Consistency graph: two views laid out once on the server (layout.focus_view / full_view):
  // the batch with its one-hop neighbours (clusters collapsed) by default, the whole graph one
  // click away. Suspects highlighted, contradiction edges red; a click opens the memory, or
  // (on a collapsed group) the whole graph.
  var gc = document.getElementById("consistency-graph");
  var gd = document.getElementById("graph-data");
  if (gc && gd) {
    var views = JSON.parse(gd.textContent);
    var current = null;
    var esc = function (t) { return String(t || "").replace(/&/g, "&amp;").replace(/</g, "&lt;"); };
    var draw = function (name) {
      var g = views[name];
      if (!g) { return; }
      current = name;
      var pos = {};
      g.nodes.forEach(function (n) { pos[n.id] = n; });
      var edgeTrace = function (conflict) {
        var x = [], y = [];
        g.edges.forEach(function (e) {
          if (!!e.conflict !== conflict || !pos[e.source] || !pos[e.target]) { return; }
          x.push(pos[e.source].x, pos[e.target].x, null); y.push(pos[e.source].y, pos[e.target].y, null);
        });
        return { x: x, y: y, type: "scatter", mode: "lines", hoverinfo: "skip", name: conflict ? "contradiction" : "similar",
                 line: { color: conflict ? "rgba(192,57,43,.75)" : "rgba(120,130,150,.35)", width: conflict ? 1.6 : 0.8 } };
      };
      var nodeTrace = function (filter, label, color, size, symbol) {
        var ns = g.nodes.filter(filter);
        return {
          x: ns.map(function (n) { return n.x; }), y: ns.map(function (n) { return n.y; }), type: "scatter",
          mode: "markers", name: label, customdata: ns.map(function (n) { return n.kind === "cluster" ? "cluster" : n.memory_pk; }),
          text: ns.map(function (n) {
            if (n.kind === "cluster") { return "<b>" + n.count + " connected neighbours</b><br>" + esc(n.members.slice(0, 6).join(", ")) + (n.members.length > 6 ? ", …" : "") + "<br>click: whole graph"; }
            return "<b>" + esc(n.id) + "</b>" + (n.rank ? " · rank " + n.rank + " · DS " + Number(n.ds).toFixed(3) : "") + "<br>" + esc(n.text).slice(0, 90);
          }),
          hovertemplate: "%{text}<extra></extra>",
          marker: { color: color, size: typeof size === "function" ? ns.map(size) : size, symbol: symbol || "circle", line: { color: "#fff", width: 1 } }
        };
      };
      var mem = function (n) { return n.kind !== "cluster"; };
      var traces = [
        edgeTrace(false), edgeTrace(true),
        nodeTrace(function (n) { return n.kind === "cluster"; }, "group of neighbours (count)", "#8a94a8",
                  function (n) { return Math.min(34, 12 + 3 * Math.sqrt(n.count)); }, "square"),
        nodeTrace(function (n) { return mem(n) && !n.suspect && !n.in_scope; }, "other memories", "#c3c9d6", 7),
        nodeTrace(function (n) { return mem(n) && !n.suspect && n.in_scope; }, "retrieved in incidents", "#3b4cca", 9),
        nodeTrace(function (n) { return mem(n) && n.suspect && !n.in_batch; }, "suspect", "#d97706", 12, "diamond"),
        nodeTrace(function (n) { return mem(n) && n.suspect && n.in_batch; }, "suspect in batch", "#c0392b", 14, "diamond")
      ];
      var clusters = g.nodes.filter(function (n) { return n.kind === "cluster"; });
      traces.push({ x: clusters.map(function (n) { return n.x; }), y: clusters.map(function (n) { return n.y; }),
                    text: clusters.map(function (n) { return String(n.count); }), type: "scatter", mode: "text",
                    hoverinfo: "skip", showlegend: false, textfont: { color: "#fff", size: 11 } });
      Plotly.react(gc, traces, {
        margin: { l: 8, r: 8, t: 8, b: 8 }, font: font, hovermode: "closest", dragmode: "pan",
        xaxis: { visible: false }, yaxis: { visible: false, scaleanchor: "x" },
        legend: { orientation: "h", x: 0, y: -0.02, yanchor: "top" },
        paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)"
      }, config);
      document.querySelectorAll("[data-graph-view]").forEach(function (b) {
        b.setAttribute("aria-pressed", String(b.getAttribute("data-graph-view") === name));
      });
    };
    document.querySelectorAll("[data-graph-view]").forEach(function (b) {
      b.addEventListener("click", function () { draw(b.getAttribute("data-graph-view")); });
    });
    draw(views.focus && views.focus.nodes.length ? "focus" : "full");
    gc.on("plotly_click", function (ev) {
      var p = ev.points && ev.points[0];
      if (!p || !p.customdata) { return; }
      if (p.customdata === "cluster") { if (current !== "full") { draw("full"); } return; }
      window.location.href = views.memory_url.replace("/0/", "/" + p.customdata + "/");
    });
  }
})();
