// Plotly charts of the memory and audit pages; the data comes from the server, rendered as is.
(function () {
  if (typeof Plotly === "undefined") { return; }
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var font = { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12, color: "#1c2330" };

  // Weight timeline: one point per signed weight entry (genesis, then each transition).
  var wc = document.getElementById("weight-chart");
  if (wc) {
    var w = JSON.parse(wc.getAttribute("data-weights"));
    Plotly.newPlot(wc, [{
      x: w.t, y: w.w, customdata: w.seq, type: "scatter", mode: "lines+markers", line: { shape: "hv", color: "#3b4cca", width: 2 },
      marker: { size: 8 }, hovertemplate: "seq %{customdata}<br>%{x}<br>weight %{y:.3f}<extra></extra>"
    }], {
      margin: { l: 48, r: 16, t: 8, b: 40 }, font: font, yaxis: { title: { text: "weight" }, rangemode: "tozero", gridcolor: "#eef0f4" },
      xaxis: { gridcolor: "#eef0f4" }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", showlegend: false
    }, config);
  }

  // Consistency graph: suspects highlighted, contradiction edges red, click opens the memory.
  var gc = document.getElementById("consistency-graph");
  var gd = document.getElementById("graph-data");
  if (gc && gd) {
    var g = JSON.parse(gd.textContent);
    var pos = {};
    g.nodes.forEach(function (n) { pos[n.id] = n; });
    function edgeTrace(conflict) {
      var x = [], y = [];
      g.edges.forEach(function (e) {
        if (!!e.conflict !== conflict || !pos[e.source] || !pos[e.target]) { return; }
        x.push(pos[e.source].x, pos[e.target].x, null); y.push(pos[e.source].y, pos[e.target].y, null);
      });
      return { x: x, y: y, type: "scatter", mode: "lines", hoverinfo: "skip", name: conflict ? "contradiction" : "similar",
               line: { color: conflict ? "rgba(192,57,43,.75)" : "rgba(120,130,150,.25)", width: conflict ? 1.6 : 0.8 } };
    }
    function nodeTrace(filter, name, color, size, symbol) {
      var ns = g.nodes.filter(filter);
      return {
        x: ns.map(function (n) { return n.x; }), y: ns.map(function (n) { return n.y; }), type: "scatter", mode: "markers",
        name: name, customdata: ns.map(function (n) { return n.memory_pk; }),
        text: ns.map(function (n) { return "<b>" + n.id + "</b>" + (n.rank ? " · rank " + n.rank + " · DS " + n.ds.toFixed(3) : "") + "<br>" + (n.text || "").replace(/</g, "&lt;").slice(0, 90); }),
        hovertemplate: "%{text}<extra></extra>",
        marker: { color: color, size: size, symbol: symbol || "circle", line: { color: "#fff", width: 1 } }
      };
    }
    var traces = [
      edgeTrace(false), edgeTrace(true),
      nodeTrace(function (n) { return !n.suspect && !n.in_scope; }, "other memories", "#c3c9d6", 7),
      nodeTrace(function (n) { return !n.suspect && n.in_scope; }, "retrieved in incidents", "#3b4cca", 9),
      nodeTrace(function (n) { return n.suspect && !n.in_batch; }, "suspect", "#d97706", 12, "diamond"),
      nodeTrace(function (n) { return n.suspect && n.in_batch; }, "suspect in batch", "#c0392b", 14, "diamond")
    ];
    Plotly.newPlot(gc, traces, {
      margin: { l: 8, r: 8, t: 8, b: 8 }, font: font, hovermode: "closest", dragmode: "pan",
      xaxis: { visible: false }, yaxis: { visible: false, scaleanchor: "x" },
      legend: { orientation: "h", x: 0, y: -0.02, yanchor: "top" },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)"
    }, config);
    gc.on("plotly_click", function (ev) {
      var p = ev.points && ev.points[0];
      if (p && p.customdata) { window.location.href = g.memory_url.replace("/0/", "/" + p.customdata + "/"); }
    });
  }
})();
